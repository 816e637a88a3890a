package install_test

import (
	"testing"

	"github.com/weftmesh/weft/mesh/install"
)

// FuzzDecode feeds arbitrary YAML streams to the strict decoder: it must
// return objects or an error, never panic, and every object it returns must
// carry its kind.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: weft\n"))
	f.Add([]byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n---\n"))
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 1, replicas: 2}\n"))
	f.Add([]byte("kind: [\n"))
	f.Add([]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: x.example.com\nspec:\n  group: example.com\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		objs, err := install.Decode(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetObjectKind().GroupVersionKind().Kind == "" {
				t.Fatalf("object %q decoded without a kind", o.GetName())
			}
		}
	})
}
