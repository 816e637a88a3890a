package crds

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var manifests embed.FS

//go:embed gatewayapi/*.yaml
var gatewayManifests embed.FS

// Files returns the embedded CRD manifests: one YAML file per CRD, at the
// root of the returned file system, named <group>_<plural>.yaml.
func Files() fs.FS {
	return manifests
}

// All decodes every embedded CRD, sorted by name (such as
// "servers.policy.linkerd.io"). Each call returns fresh objects that the
// caller may change.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decodeAll(manifests, "*.yaml")
}

// GatewayAPI decodes the Gateway API CRDs Weft reads (HTTPRoute and
// GRPCRoute of gateway.networking.k8s.io from the standard channel,
// TCPRoute and TLSRoute from the experimental channel, which serves their
// v1alpha2 beside v1), sorted by name: unchanged copies of the upstream project's manifests at the
// version of sigs.k8s.io/gateway-api in go.mod, kept in gatewayapi/ with
// that project's license. Each call returns fresh objects.
func GatewayAPI() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decodeAll(gatewayManifests, "gatewayapi/*.yaml")
}

// GatewayAPIVersion is the Gateway API release GatewayAPI's CRDs come
// from ("v1.6.3"), read from their bundle-version annotation without
// decoding them; empty if the annotation is missing.
func GatewayAPIVersion() string {
	data, err := gatewayManifests.ReadFile("gatewayapi/gateway.networking.k8s.io_httproutes.yaml")
	if err != nil {
		return ""
	}
	const key = "gateway.networking.k8s.io/bundle-version:"
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func decodeAll(fsys embed.FS, pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("crds: listing manifests: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := fsys.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("crds: %s: %w", name, err)
		}
		crd, err := decode(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns the embedded CRD with the given name, such as
// "servers.policy.linkerd.io".
func Get(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	for _, crd := range all {
		if crd.Name == name {
			return crd, nil
		}
	}
	return nil, fmt.Errorf("crds: no CRD named %q", name)
}

// decode reads one generated manifest strictly: exactly one CRD, no field
// the apiextensions/v1 types do not know.
func decode(name string, data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	// controller-gen starts each file with a document separator; a file
	// holding a second document would be a generator change we must notice.
	body := bytes.TrimPrefix(data, []byte("---\n"))
	if bytes.Contains(body, []byte("\n---")) {
		return nil, fmt.Errorf("crds: %s: more than one YAML document", name)
	}
	js, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		return nil, fmt.Errorf("crds: %s: %w", name, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	strict, err := kjson.UnmarshalStrict(js, crd)
	if err != nil {
		return nil, fmt.Errorf("crds: %s: %w", name, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("crds: %s: %s", name, strings.Join(msgs, "; "))
	}
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		return nil, fmt.Errorf("crds: %s: got %s %s, want apiextensions.k8s.io/v1 CustomResourceDefinition", name, crd.APIVersion, crd.Kind)
	}
	if want := crd.Spec.Group + "_" + crd.Spec.Names.Plural + ".yaml"; path.Base(name) != want {
		return nil, fmt.Errorf("crds: %s: holds CRD %s, want file name %s", name, crd.Name, want)
	}
	return crd, nil
}
