package manifest_test

import (
	"fmt"

	"github.com/weftmesh/weft/apis/manifest"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
)

func ExampleDecode() {
	objs, err := manifest.Decode("web.yaml", []byte(`
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
  namespace: my-app
spec:
  podSelector:
    matchLabels:
      app: web
  port: http
  proxyProtocol: HTTP/1
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objs {
		fmt.Println(o)
		if srv, ok := o.Object.(*policyv1beta3.Server); ok {
			fmt.Println("port:", srv.Spec.Port.String(), "protocol:", srv.Spec.ProxyProtocol)
		}
	}
	// Output:
	// web.yaml document 1: Server my-app/web-http
	// port: http protocol: HTTP/1
}

func ExampleDecode_strict() {
	_, err := manifest.Decode("web.yaml", []byte(`
apiVersion: v1
kind: Namespace
metadata:
  name: my-app
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
  namespace: my-app
spec:
  podSelectr:
    matchLabels:
      app: web
  port: http
`))
	fmt.Println(err)
	// Output:
	// manifest: web.yaml: document 2 (Server my-app/web-http): unknown field "spec.podSelectr" (line 13)
}

func ExampleLoadPaths() {
	objs, err := manifest.LoadPaths("../testdata/linkerd-policy.yaml", "../testdata/serviceprofile.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objs {
		fmt.Println(o.GroupVersionKind().Kind)
	}
	// Output:
	// Namespace
	// Server
	// AuthorizationPolicy
	// ServerAuthorization
	// ServiceProfile
}
