package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftmesh/weft/apis/manifest"
)

// FuzzDecode feeds arbitrary bytes to Decode. Whatever the input, Decode
// must not panic, must return either objects or an error (never both), and
// every object it returns must be complete.
func FuzzDecode(f *testing.F) {
	for _, pattern := range []string{"../testdata/*", "testdata/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, s := range []string{
		"",
		"---\n---\n",
		"...\n",
		"--- |\n  text\n",
		"a: &x [*x]\n",
		"a: &a [*a,*a,*a]\nb: &b [*a,*a,*a]\nc: &c [*b,*b,*b]\n",
		"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"apiVersion\":\"v1\",\"kind\":\"List\"}]}",
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, ports: [{containerPort: x}]}]}}\n",
		"apiVersion: policy.linkerd.io/v1beta3\nkind: ServerList\nitems: [{metadata: {name: a}, spec: {port: [1]}}]\n",
		"apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: a}\nspec: {routes: [{name: r, condition: {not: {not: {not: {method: GET}}}}}]}\n",
		"\xef\xbb\xbf{}{}[]\"x\"",
		"apiVersion: v1\r\nkind: Namespace\r\nmetadata:\r\n  name: a\r\n  name: b\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := manifest.Decode("fuzz.yaml", data)
		if err != nil {
			if objs != nil {
				t.Fatalf("objects returned with an error: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "manifest: ") {
					t.Fatalf("error line without the package prefix: %q", line)
				}
			}
			return
		}
		for _, o := range objs {
			if o.Object == nil || o.Document < 1 || o.Source != "fuzz.yaml" {
				t.Fatalf("incomplete object: %+v", o)
			}
			if gvk := o.GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" {
				t.Fatalf("object without apiVersion or kind: %+v", o)
			}
		}
	})
}
