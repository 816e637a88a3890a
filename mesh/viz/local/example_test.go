package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weftmesh/weft/mesh/viz"
	vizlocal "github.com/weftmesh/weft/mesh/viz/local"
)

// A local mesh's directory (the one `weft demo` and `weft dev` print)
// holds the manifests its control plane reads. FromDir finds its meshed
// pods as viz targets, and NewDirExplainer says why one of them refused a
// client, from the same manifests: here a Server that admits only the
// gateway's identity, and a client without one.
func ExampleFromDir() {
	dir, err := os.MkdirTemp("", "weft-local-mesh")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	const manifests = `apiVersion: v1
kind: Pod
metadata:
  name: api-0
  namespace: shop
  labels: {app: api, linkerd.io/control-plane-ns: weft}
spec:
  serviceAccountName: api
  containers:
  - name: api
    ports: [{containerPort: 8080}]
  - name: weft-proxy
    env:
    - {name: WEFT_PROXY_ADMIN_ADDR, value: "127.0.0.1:4191"}
status:
  podIP: 127.0.0.2
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: api-http, namespace: shop}
spec:
  podSelector: {matchLabels: {app: api}}
  port: 8080
---
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: gateway, namespace: shop}
spec:
  identities: ["gateway.shop.serviceaccount.identity.weft.cluster.local"]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: gateway-only, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: api-http}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: gateway}
`
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests", "mesh.yaml"), []byte(manifests), 0o600); err != nil {
		panic(err)
	}

	targets, err := vizlocal.FromDir(dir)
	if err != nil {
		panic(err)
	}
	for _, t := range targets {
		fmt.Println(t.Key(), t.Identity, t.Admin)
	}

	ex := vizlocal.NewDirExplainer(dir, "all-unauthenticated")
	for _, from := range []string{"", "gateway.shop.serviceaccount.identity.weft.cluster.local"} {
		why, err := ex.Explain(context.Background(), viz.DeniedPair{From: from, ToNamespace: "shop", ToPod: "api-0", Port: "8080"})
		if err != nil {
			panic(err)
		}
		lines := strings.Split(strings.TrimSpace(why), "\n")
		fmt.Printf("from %q: %s\n", from, lines[0])
		if strings.Contains(lines[0], "deny") {
			fmt.Println(strings.TrimSpace(lines[len(lines)-1]))
		}
	}
	// Output:
	// shop/api-0 api.shop.serviceaccount.identity.weft.cluster.local 127.0.0.1:4191
	// from "": decision: deny (unauthorized)
	// AuthorizationPolicy shop/gateway-only (via MeshTLSAuthentication shop/gateway) does not apply: it requires a mesh identity and the client has none
	// from "gateway.shop.serviceaccount.identity.weft.cluster.local": decision: allow (authorized)
}
