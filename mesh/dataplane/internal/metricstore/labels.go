package metricstore

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Label builders for the Linkerd-named series. Every value comes from a
// bounded source: discovery (authorities, endpoint addresses and metric
// labels), verified certificates (identities), policy objects (server,
// route and authorization names), the proxy's own listeners and fixed
// enumerations. None comes from a raw Host, path or header, so a client
// cannot grow them (Linkerd CVE-2025-43915); the store's cap is the last
// resort.

// MaxLabelValue bounds one label value, in bytes.
const MaxLabelValue = 256

// LabelValue makes s safe as a label value: valid UTF-8 (client_golang
// refuses anything else) and at most MaxLabelValue bytes.
func LabelValue(s string) string {
	if len(s) > MaxLabelValue {
		s = s[:MaxLabelValue]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// Values of no_tls_reason, as Linkerd spells them: a loopback peer, an
// accepted peer without mesh TLS, an endpoint discovery gave no identity.
const (
	NoTLSLoopback       = "loopback"
	NoTLSFromRemote     = "no_tls_from_remote"
	NoTLSNotProvidedDst = "not_provided_by_service_discovery"
)

// TLSAccept adds the TLS labels of a connection the proxy accepted:
// tls="true" with client_id for mesh TLS, otherwise tls="no_identity" and
// a no_tls_reason.
func TLSAccept(l *Labels, peer authz.Conn, loopback bool) *Labels {
	switch {
	case peer.TLS:
		return l.Add("tls", "true").Add("client_id", LabelValue(peer.Identity))
	case loopback:
		return l.Add("tls", "no_identity").Add("no_tls_reason", NoTLSLoopback)
	}
	return l.Add("tls", "no_identity").Add("no_tls_reason", NoTLSFromRemote)
}

// TLSConnect adds the TLS labels of a connection the proxy opened:
// tls="true" with server_id when the endpoint has an identity.
func TLSConnect(l *Labels, serverID string, loopback bool) *Labels {
	switch {
	case serverID != "":
		return l.Add("tls", "true").Add("server_id", LabelValue(serverID))
	case loopback:
		return l.Add("tls", "no_identity").Add("no_tls_reason", NoTLSLoopback)
	}
	return l.Add("tls", "no_identity").Add("no_tls_reason", NoTLSNotProvidedDst)
}

// Target adds target_addr, target_ip and target_port; an unknown
// address adds nothing.
func Target(l *Labels, ap netip.AddrPort) *Labels {
	if !ap.IsValid() {
		return l
	}
	return l.Add("target_addr", ap.String()).Add("target_ip", ap.Addr().String()).Add("target_port", strconv.Itoa(int(ap.Port())))
}

// Meta adds PREFIX_group, PREFIX_kind and PREFIX_name for a policy
// object: a built-in policy is kind "default" with its name and no group,
// as Linkerd's proxy reports them.
func Meta(l *Labels, prefix string, m authz.Meta) *Labels {
	if m.Default != "" {
		return l.Add(prefix+"_group", "").Add(prefix+"_kind", "default").Add(prefix+"_name", LabelValue(m.Default))
	}
	return l.Add(prefix+"_group", LabelValue(m.Group)).
		Add(prefix+"_kind", LabelValue(strings.ToLower(m.Kind))).
		Add(prefix+"_name", LabelValue(m.Name))
}

// Server adds the server labels (srv_group, srv_kind, srv_name,
// srv_port) of an inbound port's policy.
func Server(l *Labels, srv *authz.Server, port uint16) *Labels {
	var m authz.Meta
	if srv != nil {
		m = srv.Meta
	}
	return Meta(l, "srv", m).Add("srv_port", strconv.Itoa(int(port)))
}

// dstLabelKeys are the discovery metric labels exported as dst_*, in the
// order they are written. Discovery sends set labels (namespace, service)
// and endpoint labels (pod, serviceaccount, the owning workload by kind,
// zone); Linkerd's destination service sends the same keys. Other keys
// are ignored, so that a control plane cannot add label names.
var dstLabelKeys = []struct{ key, name string }{
	{"namespace", "dst_namespace"},
	{"service", "dst_service"},
	{"pod", "dst_pod"},
	{"serviceaccount", "dst_serviceaccount"},
	{"deployment", "dst_deployment"},
	{"daemonset", "dst_daemonset"},
	{"statefulset", "dst_statefulset"},
	{"replicaset", "dst_replicaset"},
	{"replicationcontroller", "dst_replicationcontroller"},
	{"job", "dst_k8s_job"},
	{"k8s_job", "dst_k8s_job"},
	{"cronjob", "dst_cronjob"},
	{"pod_template_hash", "dst_pod_template_hash"},
	{"control_plane_ns", "dst_control_plane_ns"},
	{"zone", "dst_zone"},
	{"zone_locality", "dst_zone_locality"},
}

// Dst adds the dst_* labels of an endpoint's discovery metric
// labels.
func Dst(l *Labels, ml map[string]string) *Labels {
	if len(ml) == 0 {
		return l
	}
	seen := ""
	for _, k := range dstLabelKeys {
		if v := ml[k.key]; v != "" && k.name != seen {
			l.Add(k.name, LabelValue(v))
			seen = k.name
		}
	}
	return l
}

// Classification is Linkerd's classification label: "failure" or
// "success".
func Classification(failure bool) string {
	if failure {
		return "failure"
	}
	return "success"
}

// PolicyMeta adds PREFIX_group, PREFIX_kind, PREFIX_namespace and
// PREFIX_name of m, and with service PREFIX_port and PREFIX_section_name,
// as Linkerd's proxy spells them: metadata of no resource is kind
// "default" with its name and the other labels empty, a port of 0 is
// empty (the labels of an outbound route's parent and route).
func PolicyMeta(l *Labels, prefix string, m *meta.Metadata, service bool) *Labels {
	group, kind, ns, name, section, port := "", "default", "", m.GetDefault(), "", ""
	if r := m.GetResource(); r != nil {
		group, kind, ns, name, section = r.GetGroup(), r.GetKind(), r.GetNamespace(), r.GetName(), r.GetSection()
		if r.GetPort() != 0 {
			port = strconv.FormatUint(uint64(r.GetPort()), 10)
		}
	}
	l.Add(prefix+"_group", LabelValue(group)).Add(prefix+"_kind", LabelValue(kind)).
		Add(prefix+"_namespace", LabelValue(ns)).Add(prefix+"_name", LabelValue(name))
	if service {
		l.Add(prefix+"_port", port).Add(prefix+"_section_name", LabelValue(section))
	}
	return l
}
