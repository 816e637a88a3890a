package policy

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Annotations Weft reads, as Linkerd names them. mesh/inject owns the
// vocabulary; these are the same keys.
const (
	AnnotationDefaultInboundPolicy = vocab.AnnotationDefaultInboundPolicy
	AnnotationOpaquePorts          = vocab.AnnotationOpaquePorts
	AnnotationRequireIdentityPorts = vocab.ConfigPrefix + "proxy-require-identity-inbound-ports"
	AnnotationInject               = vocab.AnnotationInject
)

const policyGroup = "policy.linkerd.io"

type nsName struct{ ns, name string }

func metaOf(kind string, m *metav1.ObjectMeta) authz.Meta {
	return authz.Meta{Group: policyGroup, Kind: kind, Namespace: m.Namespace, Name: m.Name}
}

// parsePortSet reads "25,587,3306-3310" into a set.
func parsePortSet(s string) (map[uint16]bool, error) {
	out := map[uint16]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parsePort(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parsePort(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("port range %q is reversed", part)
			}
		}
		for p := uint32(a); p <= uint32(b); p++ {
			out[uint16(p)] = true
		}
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	return uint16(n), nil
}

func isCoreGroup(g string) bool { return g == "" || g == "core" }

func groupKind(group, kind string) string {
	if isCoreGroup(group) {
		return kind
	}
	return kind + "." + group
}
