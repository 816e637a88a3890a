package static_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/static"
)

// Serve endpoints from a directory of manifests, reloaded on change.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "weft-manifests")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(`
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-a
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.0.0.1"]
`), 0o600)

	idx, _ := discovery.NewIndex()
	defer idx.Close()
	src, err := static.New(context.Background(), idx, []string{dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	// idx is now a discovery.Source: mount discovery.NewServer(idx) on a
	// grpc.Server.
	fmt.Println(idx.Stats().Objects["EndpointSlice"], "slice loaded, revision", src.Revision())
	// Output: 1 slice loaded, revision 1
}
