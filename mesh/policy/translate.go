package policy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

const policyGroup = "policy.linkerd.io"

type nsName struct{ ns, name string }

func metaOf(kind string, m *metav1.ObjectMeta) authz.Meta {
	return authz.Meta{Group: policyGroup, Kind: kind, Namespace: m.Namespace, Name: m.Name}
}

func isCoreGroup(g string) bool { return g == "" || g == "core" }

func groupKind(group, kind string) string {
	if isCoreGroup(group) {
		return kind
	}
	return kind + "." + group
}
