package install_test

import (
	"testing"

	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// BenchmarkRenderYAML measures a whole install: checks of the inputs,
// rendering and serialization (the CRDs are most of the bytes).
func BenchmarkRenderYAML(b *testing.B) {
	f := newFixture(b, "weft")
	var size int
	for b.Loop() {
		m, err := install.Render(inject.DefaultValues(), f.certs, install.WithHA())
		if err != nil {
			b.Fatal(err)
		}
		data, err := m.YAML()
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(size), "bytes/manifest")
}

// BenchmarkDecode measures the strict read-back of a whole install.
func BenchmarkDecode(b *testing.B) {
	f := newFixture(b, "weft")
	m, err := install.Render(inject.DefaultValues(), f.certs, install.WithHA())
	if err != nil {
		b.Fatal(err)
	}
	data, err := m.YAML()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := install.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
