package inject_test

import (
	"testing"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// BenchmarkRender renders the proxy for a typical annotated pod.
func BenchmarkRender(b *testing.B) {
	values := testValues(b)
	pod := appPod("shop", seedAnnotations())
	ns := namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"})
	b.ReportAllocs()
	for b.Loop() {
		patch, report, err := inject.Render(pod, ns, values)
		if err != nil || !report.Injected || len(patch) == 0 {
			b.Fatal("render failed", err)
		}
	}
}
