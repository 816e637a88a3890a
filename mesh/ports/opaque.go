package ports

import "github.com/weftmesh/weft/apis/vocab"

// Source says where a set of opaque ports came from.
type Source uint8

// Sources, from the most specific.
const (
	// FromObject: the pod's or Service's own annotation.
	FromObject Source = iota
	// FromNamespace: the namespace's annotation.
	FromNamespace
	// FromDefault: the default list (for a pod, the ports of it that a
	// container declares).
	FromDefault
)

// String returns "annotation", "namespace annotation" or "default".
func (s Source) String() string {
	switch s {
	case FromObject:
		return "annotation"
	case FromNamespace:
		return "namespace annotation"
	}
	return "default"
}

// annotated returns the first annotation set among objAnn and nsAnn.
func annotated(objAnn, nsAnn map[string]string, named map[string]int32) (Set, Source, bool, error) {
	if v, ok := objAnn[vocab.AnnotationOpaquePorts]; ok {
		s, err := Parse(v, named)
		return s, FromObject, true, err
	}
	if v, ok := nsAnn[vocab.AnnotationOpaquePorts]; ok {
		s, err := Parse(v, named)
		return s, FromNamespace, true, err
	}
	return Set{}, FromDefault, false, nil
}

// OpaqueForPod returns the opaque ports of a pod (or pod template): its
// config.linkerd.io/opaque-ports annotation, else its namespace's (nil
// when unknown), else the ports of defaults that declared holds (the
// container ports of its containers and init containers). named maps the
// pod's container port names to numbers. An annotation that does not
// parse gives the empty set and the error.
func OpaqueForPod(podAnn, nsAnn map[string]string, named map[string]int32, declared []uint16, defaults Set) (Set, Source, error) {
	if s, src, ok, err := annotated(podAnn, nsAnn, named); ok {
		return s, src, err
	}
	return defaults.Only(declared), FromDefault, nil
}

// OpaqueForService returns the opaque ports of a Service: its
// config.linkerd.io/opaque-ports annotation, else its namespace's (nil
// when unknown), else defaults. An annotation that does not parse gives
// the empty set and the error.
func OpaqueForService(svcAnn, nsAnn map[string]string, defaults Set) (Set, Source, error) {
	if s, src, ok, err := annotated(svcAnn, nsAnn, nil); ok {
		return s, src, err
	}
	return defaults, FromDefault, nil
}
