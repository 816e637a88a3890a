package install

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
)

// Scheme returns a fresh scheme with every built-in Kubernetes kind and
// CustomResourceDefinition (apiextensions.k8s.io/v1): what an install
// manifest may hold.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("install: scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("install: scheme: %w", err)
	}
	return s, nil
}

// Decode reads a YAML stream (documents separated by "---") strictly into
// typed objects: an unknown kind, an unknown or duplicated field, or a
// value of the wrong type is an error naming the document. Empty documents
// are skipped. It is how tests (and users) check that an install manifest
// means what it says.
func Decode(data []byte) ([]Object, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	ser := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Object
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("install: document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		if u, ok, err := podMonitor(doc); ok || err != nil {
			if err != nil {
				return nil, fmt.Errorf("install: document %d: %w", n, err)
			}
			out = append(out, u)
			continue
		}
		obj, gvk, err := ser.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("install: document %d: %w", n, err)
		}
		o, ok := obj.(Object)
		if !ok {
			return nil, fmt.Errorf("install: document %d: %s is not an object with metadata", n, gvk)
		}
		// The typed decoder clears apiVersion and kind; put them back so
		// the objects serialize and compare as they were written.
		o.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, o)
	}
}

// podMonitor decodes doc when it is a PodMonitor (monitoring.coreos.com/v1,
// a kind of the Prometheus Operator) or an APIService
// (apiregistration.k8s.io/v1, of kube-aggregator), kinds that no Go scheme
// here knows, as an unstructured object.
func podMonitor(doc []byte) (Object, bool, error) {
	js, err := utilyaml.ToJSON(doc)
	if err != nil {
		return nil, false, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, false, err
	}
	switch {
	case tm.APIVersion == "monitoring.coreos.com/v1" && tm.Kind == "PodMonitor":
	case tm.APIVersion == "apiregistration.k8s.io/v1" && tm.Kind == "APIService":
	default:
		return nil, false, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, true, err
	}
	return u, true, nil
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) == 0 || t[0] == '#' {
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}
