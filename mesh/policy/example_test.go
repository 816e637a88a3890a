package policy_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

const exampleManifests = `apiVersion: v1
kind: Namespace
metadata: {name: my-app, annotations: {linkerd.io/inject: enabled}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: my-app}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: example/web, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: web}}
  port: http
  proxyProtocol: HTTP/1
  accessPolicy: deny
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: web-api-gateway, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: api-gateway}]
`

func ExampleIndex_Evaluate() {
	ms, err := manifest.Decode("example.yaml", []byte(exampleManifests))
	if err != nil {
		fmt.Println(err)
		return
	}
	objs, err := policy.ObjectsFromManifests(ms)
	if err != nil {
		fmt.Println(err)
		return
	}
	ix := policy.Build(objs, nil)
	web := policy.WorkloadRef{Namespace: "my-app", Kind: "deployment", Name: "web"}
	for _, sa := range []string{"api-gateway", "reports"} {
		res, err := ix.Evaluate(policy.Request{
			Workload: web,
			Port:     intstr.FromString("http"),
			Client:   policy.Client{ServiceAccount: sa, Namespace: "my-app"},
			HTTP:     &authz.Request{Method: "GET", Path: "/items"},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		by := "nothing"
		if res.Authorization != nil {
			by = res.Authorization.Meta.String()
		}
		fmt.Printf("%s: %s (%s, by %s)\n", sa, res.Decision, res.Reason, by)
	}
	// Output:
	// api-gateway: allow (authorized, by AuthorizationPolicy my-app/web-api-gateway)
	// reports: deny (unauthorized, by nothing)
}

// Backing the indexer's and servers' metrics with Prometheus: the first
// index build is observed as NewIndexer returns.
func ExampleNewPrometheusMetrics() {
	reg := prometheus.NewRegistry()
	m, err := policy.NewPrometheusMetrics(reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	src := policy.NewMemorySource(&policy.Objects{}) // or a Kubernetes or static source
	if _, err := policy.NewIndexer(context.Background(), src, policy.WithMetrics(m)); err != nil {
		fmt.Println(err)
		return
	}
	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		fmt.Println(f.GetName(), "builds:", f.GetMetric()[0].GetHistogram().GetSampleCount())
	}
	// Output: weft_policy_index_rebuild_seconds builds: 1
}
