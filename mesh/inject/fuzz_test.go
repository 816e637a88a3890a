package inject_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// FuzzParsePorts checks that the port-list parser never panics and that its
// canonical output parses back to itself.
func FuzzParsePorts(f *testing.F) {
	for _, s := range []string{"", "80", "25,587,3306", "9000-9100", "9000-8000", "http,8080", " 1 , 2 ", "0", "65536", "1-65535", "a-b", ",", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := inject.ParsePorts(s, map[string]int32{"http": 8080})
		if err != nil {
			return
		}
		again, err := inject.ParsePorts(r.String(), nil)
		require.NoError(t, err, "canonical form %q of %q must parse", r.String(), s)
		assert.Equal(t, r, again)
	})
}

// FuzzRenderAnnotations puts one arbitrary annotation on a pod and on its
// namespace: rendering must never panic; when it injects, the patch must
// apply with an independent JSON Patch library, decode strictly as a Pod,
// and rendering the result again must yield no patch.
func FuzzRenderAnnotations(f *testing.F) {
	for _, kv := range [][2]string{
		{vocab.AnnotationInject, "enabled|disabled"},
		{vocab.AnnotationProxyCPURequest, "100x"},
		{vocab.AnnotationSkipInboundPorts, "9000-8000"},
		{vocab.AnnotationOpaquePorts, "mysql,80"},
		{vocab.AnnotationProxyLogLevel, "warn,linkerd=info"},
		{"config.linkerd.io/a~b/c", "x"},
		{vocab.AnnotationNativeSidecarAlpha, "false"},
		{vocab.AnnotationShutdownGracePeriod, "1h"},
		{vocab.AnnotationInboundPort, "3306"},
		{vocab.AnnotationProxyAdditionalEnv, `[{"name":"A","value":"b"}]`},
		{vocab.AnnotationEnableDebugSidecar, "true"},
		{vocab.AnnotationCloseWaitTimeout, "1h"},
		{vocab.AnnotationSkipSubnets, "10.0.0.0/8,fd00::/8"},
		{vocab.AnnotationAccessLog, "JSON"},
		{vocab.AnnotationPodInboundPorts, "7000-7002"},
	} {
		f.Add(kv[0], kv[1], true)
		f.Add(kv[0], kv[1], false)
	}
	values := testValues(f)
	f.Fuzz(func(t *testing.T, key, value string, onPod bool) {
		pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"})
		ns := namespace("shop", nil)
		if onPod {
			pod.Annotations[key] = value
		} else {
			ns.Annotations = map[string]string{key: value}
		}
		patch, report, err := inject.Render(pod, ns, values)
		if err != nil {
			assert.Empty(t, patch)
			return
		}
		if !report.Injected {
			assert.Empty(t, patch)
			return
		}
		out := applyPatch(t, pod, patch)
		again, _, err := inject.Render(out, ns, values)
		require.NoError(t, err)
		assert.Empty(t, again)
	})
}

// FuzzTransform feeds arbitrary manifests to `weft inject --manual`: it
// must never panic, and whatever it accepts it must accept again with the
// same result (idempotence).
func FuzzTransform(f *testing.F) {
	for _, name := range []string{"seed.yaml", "namespaced.yaml", "kinds.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b}]}\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}]}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[null,{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}]}`))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b}, {name: linkerd-proxy}], initContainers: [{name: linkerd-init}]}\n"))
	tr, err := inject.NewTransformer(testValues(f), inject.WithManual())
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		_, err := tr.Transform(context.Background(), []inject.Input{{Name: "fuzz", Data: data}}, &out, io.Discard)
		if err != nil {
			assert.Zero(t, out.Len())
			return
		}
		var again bytes.Buffer
		_, err = tr.Transform(context.Background(), []inject.Input{{Name: "again", Data: out.Bytes()}}, &again, io.Discard)
		require.NoError(t, err, "output must be accepted again:\n%s", out.String())
		assert.Equal(t, out.String(), again.String())
	})
}
