package inject_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/mesh/inject"
)

// Render is a pure function: a pod, its namespace and the install values in,
// a JSON Patch and a report out.
func ExampleRender() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "shop",
			Annotations: map[string]string{
				"config.linkerd.io/proxy-cpu-request": "100m",
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1"}}},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "shop",
		Annotations: map[string]string{"linkerd.io/inject": "enabled", "config.linkerd.io/proxy-log-level": "debug"},
	}}

	patch, report, err := inject.Render(pod, ns, inject.DefaultValues())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(report.Summary(), "with", len(patch), "patch operations")
	for _, name := range []string{"inject", "proxy-cpu-request", "proxy-log-level", "inbound-port"} {
		s, _ := setting0(report, name)
		fmt.Println(s)
	}
	// Output:
	// pod "web" injected with 8 patch operations
	// inject=enabled (namespace annotation linkerd.io/inject)
	// proxy-cpu-request=100m (pod annotation config.linkerd.io/proxy-cpu-request)
	// proxy-log-level=debug (namespace annotation config.linkerd.io/proxy-log-level)
	// inbound-port=4143 (values)
}

func setting0(r inject.Report, name string) (inject.Setting, bool) {
	for _, s := range r.Settings {
		if s.Name == name {
			return s, true
		}
	}
	return inject.Setting{}, false
}

// Resolve shows which layer set each value, without rendering anything.
func ExampleResolve() {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "data",
		Annotations: map[string]string{"config.linkerd.io/skip-inbound-ports": "9000-9100, 8443"}}}
	cfg, err := inject.Resolve(pod, nil, inject.DefaultValues())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.SkipInboundPorts)
	_, err = inject.Resolve(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "data",
		Annotations: map[string]string{"config.linkerd.io/proxy-cpu-request": "100x"}}}, nil, inject.DefaultValues())
	fmt.Println(err)
	// Output:
	// 8443,9000-9100
	// inject: pod "data/db": annotation config.linkerd.io/proxy-cpu-request="100x": "100x" is not a quantity
}

// A Transformer is all `weft inject` needs: inputs in, documents and
// reports out.
func ExampleTransformer_Transform() {
	manifest := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: example.com/web:1
`
	t, err := inject.NewTransformer(inject.DefaultValues())
	if err != nil {
		fmt.Println(err)
		return
	}
	var out bytes.Buffer
	_, err = t.Transform(context.Background(), []inject.Input{{Name: "web.yaml", Data: []byte(manifest)}}, &out, os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Contains(out.String(), "linkerd.io/inject: enabled"))
	// Output:
	// deployment "web" injected
	//   inject=enabled (caller)
	// true
}
