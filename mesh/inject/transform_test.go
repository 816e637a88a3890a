package inject_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

func readTestdata(t *testing.T, names ...string) []inject.Input {
	t.Helper()
	var paths []string
	for _, n := range names {
		paths = append(paths, filepath.Join("testdata", n))
	}
	in, err := inject.ReadInputs(paths, nil)
	require.NoError(t, err)
	return in
}

func transform(t *testing.T, inputs []inject.Input, opts ...inject.TransformOption) (string, string, []inject.Report) {
	t.Helper()
	tr, err := inject.NewTransformer(testValues(t), opts...)
	require.NoError(t, err)
	var out, rep bytes.Buffer
	reports, err := tr.Transform(context.Background(), inputs, &out, &rep)
	require.NoError(t, err)
	return out.String(), rep.String(), reports
}

// splitYAML returns the documents of a YAML stream.
func splitYAML(s string) []string {
	var docs []string
	for _, d := range regexp.MustCompile(`(?m)^---\n`).Split(s, -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func decodeStrict(t *testing.T, doc string, into any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), into), doc)
}

func TestTransformManualGivesTheSeedProxyItsAnnotatedResources(t *testing.T) {
	out, rep, reports := transform(t, readTestdata(t, "seed.yaml"), inject.WithManual())
	docs := splitYAML(out)
	require.Len(t, docs, 1)
	var d appsv1.Deployment
	decodeStrict(t, docs[0], &d)
	pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
	proxy := container(pod, vocab.ProxyContainerName)
	require.NotNil(t, proxy)
	assert.Equal(t, "100m", proxy.Resources.Requests.Cpu().String())
	assert.Equal(t, "64Mi", proxy.Resources.Requests.Memory().String())
	assert.Equal(t, "1", proxy.Resources.Limits.Cpu().String())
	assert.Equal(t, "250Mi", proxy.Resources.Limits.Memory().String())
	assert.Equal(t, "warn,linkerd=info", env(proxy)[vocab.EnvLogLevel])

	require.Len(t, reports, 1)
	assert.Equal(t, "Deployment", reports[0].Kind)
	assert.Equal(t, "emojivoto", reports[0].Namespace)
	assert.True(t, strings.HasPrefix(rep, `deployment "web" injected`+"\n"), rep)
	assert.Contains(t, rep, "proxy-cpu-request=100m (pod annotation config.linkerd.io/proxy-cpu-request)")
	assert.Contains(t, rep, "proxy-log-level=warn,linkerd=info (pod annotation config.linkerd.io/proxy-log-level)")
	assert.NotContains(t, rep, "(values)", "without verbose only annotated settings are listed")
}

func TestTransformManualInheritsFromTheNamespaceInTheInput(t *testing.T) {
	out, rep, reports := transform(t, readTestdata(t, "namespaced.yaml"), inject.WithManual(), inject.WithVerboseReport())
	docs := splitYAML(out)
	require.Len(t, docs, 3)

	var d appsv1.Deployment
	decodeStrict(t, docs[2], &d)
	pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
	proxy := container(pod, vocab.ProxyContainerName)
	require.NotNil(t, proxy)
	assert.Equal(t, "200m", proxy.Resources.Requests.Cpu().String(), "from the namespace")
	assert.Equal(t, "info", env(proxy)[vocab.EnvLogLevel], "the pod's own annotation wins")
	assert.Equal(t, "5432", env(proxy)[vocab.EnvOutboundSkipPorts])
	assert.Equal(t, "200m", pod.Annotations[vocab.AnnotationProxyCPURequest], "inherited setting recorded on the pod")

	require.Len(t, reports, 3, "one line per document: namespace, service, deployment")
	assert.Equal(t, inject.ReasonUnsupportedKind, reports[1].Reason, "a Service passes through")
	assert.Equal(t, inject.SourceNamespace, setting(t, reports[2], "proxy-cpu-request").Source)
	assert.Equal(t, inject.SourcePod, setting(t, reports[2], "proxy-log-level").Source)
	assert.Equal(t, inject.SourceNamespace, setting(t, reports[2], "inject").Source)
	assert.Contains(t, rep, "proxy-cpu-request=200m (namespace annotation config.linkerd.io/proxy-cpu-request)")
	assert.Contains(t, rep, "admin-port=4191 (values)", "verbose lists defaults too")

	// The Namespace and the Service pass through byte for byte.
	in := readTestdata(t, "namespaced.yaml")[0].Data
	assert.Contains(t, string(in), docs[1])
	assert.Contains(t, docs[1], "# keep this comment")
}

func TestTransformAnnotatesPodTemplatesByDefault(t *testing.T) {
	out, rep, _ := transform(t, readTestdata(t, "kinds.yaml"))
	docs := splitYAML(out)
	require.Len(t, docs, 6)

	var list corev1.List
	decodeStrict(t, docs[0], &list)
	var ds appsv1.DaemonSet
	require.NoError(t, json.Unmarshal(list.Items[0].Raw, &ds))
	assert.Equal(t, "enabled", ds.Spec.Template.Annotations[vocab.AnnotationInject])
	assert.Empty(t, ds.Spec.Template.Spec.InitContainers, "annotate-only adds no containers")
	var cm corev1.ConfigMap
	require.NoError(t, json.Unmarshal(list.Items[1].Raw, &cm))
	assert.Equal(t, "value", cm.Data["key"])

	var sts appsv1.StatefulSet
	decodeStrict(t, docs[1], &sts)
	assert.Equal(t, "enabled", sts.Spec.Template.Annotations[vocab.AnnotationInject], "template without metadata gets one")
	var cj batchv1.CronJob
	decodeStrict(t, docs[2], &cj)
	assert.Equal(t, "enabled", cj.Spec.JobTemplate.Spec.Template.Annotations[vocab.AnnotationInject])
	var job batchv1.Job
	decodeStrict(t, docs[3], &job)
	assert.Equal(t, "disabled", job.Spec.Template.Annotations[vocab.AnnotationInject])
	var rs appsv1.ReplicaSet
	decodeStrict(t, docs[4], &rs)
	assert.NotContains(t, rs.Spec.Template.Annotations, vocab.AnnotationInject)
	var pod corev1.Pod
	decodeStrict(t, docs[5], &pod)
	assert.Equal(t, "enabled", pod.Annotations[vocab.AnnotationInject])

	assert.Equal(t, strings.Join([]string{
		`daemonset "agent" injected`,
		`configmap "settings" skipped: v1 ConfigMap is not a workload; passed through unchanged`,
		`statefulset "db" injected`,
		`cronjob "report" injected`,
		`job "migrate" skipped: pod has linkerd.io/inject: disabled`,
		`replicaset "legacy" skipped: pod uses the host network (hostNetwork: true)`,
		`pod "debug" injected`,
	}, "\n")+"\n", stripIndented(rep))
}

func stripIndented(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "  ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestTransformManualHandlesEveryWorkloadKind(t *testing.T) {
	out, _, reports := transform(t, readTestdata(t, "kinds.yaml"), inject.WithManual(), inject.WithOutput(inject.FormatJSON))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 6, "one JSON object per line")
	for _, l := range lines {
		assert.True(t, json.Valid([]byte(l)))
		assert.NotContains(t, l, "\n")
	}
	var cj batchv1.CronJob
	require.NoError(t, yaml.UnmarshalStrict([]byte(lines[2]), &cj))
	pod := &corev1.Pod{Spec: cj.Spec.JobTemplate.Spec.Template.Spec}
	require.NotNil(t, container(pod, vocab.ProxyContainerName))
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *container(pod, vocab.ProxyContainerName).RestartPolicy,
		"a Job's proxy is a native sidecar so the Job can finish")
	injected := 0
	for _, r := range reports {
		if r.Injected {
			injected++
		}
	}
	assert.Equal(t, 4, injected)
}

func TestTransformIsIdempotent(t *testing.T) {
	for _, opts := range [][]inject.TransformOption{
		{inject.WithManual()},
		{},
		{inject.WithManual(), inject.WithOutput(inject.FormatJSON)},
	} {
		first, _, _ := transform(t, readTestdata(t, "namespaced.yaml", "kinds.yaml", "seed.yaml"), opts...)
		second, rep, _ := transform(t, []inject.Input{{Name: "again", Data: []byte(first)}}, opts...)
		assert.Equal(t, first, second)
		assert.NotContains(t, rep, " injected\n  proxy", "second pass injects nothing new")
	}
}

func TestTransformReadsDirectoriesAndStdin(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	seed, err := os.ReadFile(filepath.Join("testdata", "seed.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "b.yml"), seed, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644))

	in, err := inject.ReadInputs([]string{dir, "-"}, strings.NewReader("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"))
	require.NoError(t, err)
	require.Len(t, in, 3)
	assert.Equal(t, filepath.Join(dir, "a.json"), in[0].Name)
	assert.Equal(t, filepath.Join(dir, "sub", "b.yml"), in[1].Name)
	assert.Equal(t, "-", in[2].Name)

	out, rep, _ := transform(t, in)
	assert.Len(t, splitYAML(out), 3)
	assert.Contains(t, out, "kind: ConfigMap", "JSON input is printed as YAML")
	assert.Equal(t, strings.Join([]string{
		`configmap "c" skipped: v1 ConfigMap is not a workload; passed through unchanged`,
		`deployment "web" injected`,
		`secret "s" skipped: v1 Secret is not a workload; passed through unchanged`,
	}, "\n")+"\n", stripIndented(rep))
}

func TestTransformRefusesBadInputWithoutWritingAnything(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"unknown field", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      contaners: []\n",
			[]string{"bad.yaml: document 1 (Deployment)", "contaners"}},
		{"duplicate field", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n", []string{"bad.yaml: document 1", `key "name" already set`}},
		{"invalid annotation", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: shop\n  annotations:\n    config.linkerd.io/proxy-cpu-request: 100x\nspec:\n  containers:\n  - name: a\n    image: b\n",
			[]string{"bad.yaml: document 2 (Pod shop/p)", `annotation config.linkerd.io/proxy-cpu-request="100x"`}},
		{"missing kind", "apiVersion: v1\nmetadata:\n  name: x\n", []string{"bad.yaml: document 1: missing apiVersion or kind"}},
		{"not an object", "- a\n- b\n", []string{"bad.yaml: document 1: not an object"}},
		{"bad separator", "apiVersion: v1\nkind: ConfigMap\n--- junk\n", []string{"bad.yaml"}},
		{"malformed json", `{"apiVersion": "v1", "kind": `, []string{"bad.yaml: document 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := inject.NewTransformer(testValues(t), inject.WithManual())
			require.NoError(t, err)
			var out, rep bytes.Buffer
			_, err = tr.Transform(context.Background(), []inject.Input{{Name: "bad.yaml", Data: []byte(tc.data)}}, &out, &rep)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Zero(t, out.Len(), "no partial output")
			assert.Zero(t, rep.Len())
		})
	}
}

func TestTransformLooksUpNamespacesMissingFromTheInput(t *testing.T) {
	ns := namespace("emojivoto", map[string]string{vocab.AnnotationProxyLogFormat: "json"})
	_, _, reports := transform(t, readTestdata(t, "seed.yaml"), inject.WithManual(), inject.WithNamespaces(inject.NewStaticNamespaces(ns)))
	require.Len(t, reports, 1)
	s := setting(t, reports[0], "proxy-log-format")
	assert.Equal(t, "json", s.Value)
	assert.Equal(t, inject.SourceNamespace, s.Source)
}

func TestTransformWritesJSONReports(t *testing.T) {
	_, rep, _ := transform(t, readTestdata(t, "seed.yaml"), inject.WithManual(), inject.WithJSONReport())
	var r inject.Report
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(rep)), &r))
	assert.True(t, r.Injected)
	assert.Equal(t, "web", r.Name)
	found := false
	for _, s := range r.Settings {
		if s.Name == "proxy-memory-limit" {
			found = true
			assert.Equal(t, "250Mi", s.Value)
			assert.Equal(t, inject.SourcePod, s.Source)
		}
	}
	assert.True(t, found)
	assert.Contains(t, rep, `"source":"pod"`)
}

func TestNewTransformerRejectsUnknownFormat(t *testing.T) {
	_, err := inject.NewTransformer(testValues(t), inject.WithOutput("xml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"xml"`)
}
