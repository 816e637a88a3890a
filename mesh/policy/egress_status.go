package policy

import (
	"encoding/json"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Reasons of an EgressNetwork's Accepted condition besides "Accepted".
const (
	// ReasonEgressNetworkOverlap is Linkerd's reason for an
	// EgressNetwork one of whose networks overlaps the cluster networks.
	ReasonEgressNetworkOverlap = "EgressReasonNetworkOverlap"
	// ReasonEgressNetworkInvalid is Weft's for an EgressNetwork it
	// ignores because a field breaks the admission rules (which Linkerd's
	// webhook enforces before any status is written; Weft also reads
	// objects that never passed a webhook, such as files).
	ReasonEgressNetworkInvalid = "Invalid"
)

// conditionAccepted is the condition type Weft owns on an EgressNetwork.
const conditionAccepted = "Accepted"

// EgressNetworkStatus is what policy says about one EgressNetwork:
// the conditions it carries now and the Accepted condition Weft's policy
// controller owns, as Linkerd's writes it. Accepted is True when the
// EgressNetwork is valid and none of its networks overlaps the cluster
// networks; a route whose parent is an EgressNetwork that is not
// accepted is not accepted either (see RouteStatus).
type EgressNetworkStatus struct {
	Namespace, Name string
	// ResourceVersion is the version of the object Current was read
	// from, for an optimistic write.
	ResourceVersion string
	// Current is status.conditions as the object carries it.
	Current []metav1.Condition
	// Accepted is the condition Weft owns, with the object's generation
	// as ObservedGeneration and a zero LastTransitionTime.
	Accepted metav1.Condition
}

// Ref renders the EgressNetwork as problems name it.
func (s EgressNetworkStatus) Ref() ObjectRef {
	return ObjectRef{Kind: "EgressNetwork", Namespace: s.Namespace, Name: s.Name}
}

// Merge returns the status.conditions to write: the conditions of other
// types as they are and in their order, then Weft's Accepted condition
// (Linkerd's policy controller owns the Accepted type the same way). The
// condition keeps the LastTransitionTime it carries when its status did
// not change; otherwise it gets now. changed is false when the result
// equals Current, so a writer that writes only on change never writes
// twice for the same state.
func (s EgressNetworkStatus) Merge(now time.Time) (conds []metav1.Condition, changed bool) {
	want := s.Accepted
	want.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	for _, c := range s.Current {
		if c.Type != conditionAccepted {
			conds = append(conds, c)
			continue
		}
		if c.Status == want.Status {
			want.LastTransitionTime = c.LastTransitionTime
		}
	}
	conds = append(conds, want)
	return conds, !sameConditions(conds, s.Current)
}

// sameConditions compares two condition lists as the API server stores
// them (their JSON), so times compare at the second.
func sameConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// EgressNetworkStatuses returns the status of every EgressNetwork in the
// snapshot, in the order of Objects. It is a pure function of the index.
func (ix *Index) EgressNetworkStatuses() []EgressNetworkStatus { return ix.egressStatus }

// egressStatuses computes every EgressNetwork's status once the egress
// index is built, and records which EgressNetworks exist and which are
// accepted, for the status of the routes that name them.
func (b *builder) egressStatuses(ox *outboundIndex) []EgressNetworkStatus {
	valid := map[nsName]*egressNet{}
	for _, e := range ox.egress {
		valid[nsName{e.ref.Namespace, e.ref.Name}] = e
	}
	firstError := b.firstErrors()
	b.egressAccepted = map[nsName]bool{}
	out := make([]EgressNetworkStatus, 0, len(b.objs.EgressNetworks))
	for _, en := range b.objs.EgressNetworks {
		st := EgressNetworkStatus{Namespace: en.Namespace, Name: en.Name, ResourceVersion: en.ResourceVersion}
		if en.Status != nil {
			st.Current = en.Status.Conditions
		}
		key := nsName{en.Namespace, en.Name}
		c := metav1.Condition{Type: conditionAccepted, ObservedGeneration: en.Generation}
		switch e := valid[key]; {
		case e == nil:
			msg := firstError[ObjectRef{Kind: "EgressNetwork", Namespace: en.Namespace, Name: en.Name}]
			if msg == "" {
				msg = "the EgressNetwork is invalid"
			}
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonEgressNetworkInvalid, msg+"; the EgressNetwork is ignored"
		case overlapsCluster(e.nets, b.cfg.ClusterNetworks):
			// Linkerd's words.
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonEgressNetworkOverlap, "networks overlap with clusterNetworks"
		default:
			c.Status, c.Reason = metav1.ConditionTrue, conditionAccepted
		}
		if len(c.Message) > maxConditionMessage {
			c.Message = strings.ToValidUTF8(c.Message[:maxConditionMessage], "")
		}
		b.egressAccepted[key] = c.Status == metav1.ConditionTrue
		st.Accepted = c
		out = append(out, st)
	}
	return out
}

// overlapsCluster says whether one of nets overlaps one of the cluster
// networks, as Linkerd decides it: a network and a cluster network
// overlap when one contains the other, unless one of the network's
// exceptions contains the whole cluster network. (An exception that
// carves out only part of a cluster network leaves an overlap.)
func overlapsCluster(nets []authz.Network, cluster []netip.Prefix) bool {
	for _, n := range nets {
		for _, c := range cluster {
			if !prefixContains(n.Net, c) && !prefixContains(c, n.Net) {
				continue
			}
			excepted := false
			for _, ex := range n.Except {
				if prefixContains(ex, c) {
					excepted = true
					break
				}
			}
			if !excepted {
				return true
			}
		}
	}
	return false
}

// prefixContains reports whether every address of q is in p (both of
// one address family).
func prefixContains(p, q netip.Prefix) bool {
	p, q = unmapPrefix(p), unmapPrefix(q)
	return p.Addr().Is4() == q.Addr().Is4() && p.Bits() <= q.Bits() && p.Masked().Contains(q.Addr())
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// firstErrors maps each object to the first error found translating it
// ("field: message").
func (b *builder) firstErrors() map[ObjectRef]string {
	firstError := map[ObjectRef]string{}
	for _, p := range b.p.list {
		if _, seen := firstError[p.Object]; !seen && p.Severity == SeverityError {
			msg := p.Message
			if p.Field != "" {
				msg = p.Field + ": " + msg
			}
			firstError[p.Object] = msg
		}
	}
	return firstError
}
