package dataplane

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Label builders for the Linkerd-named series. Every value comes from a
// bounded source: discovery (authorities, endpoint addresses and metric
// labels), verified certificates (identities), policy objects (server,
// route and authorization names), the proxy's own listeners and fixed
// enumerations. None comes from a raw Host, path or header, so a client
// cannot grow them (Linkerd CVE-2025-43915); the store's cap is the last
// resort.

// maxLabelValue bounds one label value, in bytes.
const maxLabelValue = 256

// labelValue makes s safe as a label value: valid UTF-8 (client_golang
// refuses anything else) and at most maxLabelValue bytes.
func labelValue(s string) string {
	if len(s) > maxLabelValue {
		s = s[:maxLabelValue]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// Values of no_tls_reason, as Linkerd spells them.
const (
	noTLSLoopback       = "loopback"
	noTLSFromRemote     = "no_tls_from_remote"
	noTLSNotProvidedDst = "not_provided_by_service_discovery"
)

// tlsAccept adds the TLS labels of a connection the proxy accepted:
// tls="true" with client_id for mesh TLS, otherwise tls="no_identity" and
// a no_tls_reason.
func tlsAccept(l *labels, peer authz.Conn, loopback bool) *labels {
	switch {
	case peer.TLS:
		return l.add("tls", "true").add("client_id", labelValue(peer.Identity))
	case loopback:
		return l.add("tls", "no_identity").add("no_tls_reason", noTLSLoopback)
	}
	return l.add("tls", "no_identity").add("no_tls_reason", noTLSFromRemote)
}

// tlsConnect adds the TLS labels of a connection the proxy opened:
// tls="true" with server_id when the endpoint has an identity.
func tlsConnect(l *labels, serverID string, loopback bool) *labels {
	switch {
	case serverID != "":
		return l.add("tls", "true").add("server_id", labelValue(serverID))
	case loopback:
		return l.add("tls", "no_identity").add("no_tls_reason", noTLSLoopback)
	}
	return l.add("tls", "no_identity").add("no_tls_reason", noTLSNotProvidedDst)
}

// targetLabels adds target_addr, target_ip and target_port; an unknown
// address adds nothing.
func targetLabels(l *labels, ap netip.AddrPort) *labels {
	if !ap.IsValid() {
		return l
	}
	return l.add("target_addr", ap.String()).add("target_ip", ap.Addr().String()).add("target_port", strconv.Itoa(int(ap.Port())))
}

// metaLabels adds PREFIX_group, PREFIX_kind and PREFIX_name for a policy
// object: a built-in policy is kind "default" with its name and no group,
// as Linkerd's proxy reports them.
func metaLabels(l *labels, prefix string, m authz.Meta) *labels {
	if m.Default != "" {
		return l.add(prefix+"_group", "").add(prefix+"_kind", "default").add(prefix+"_name", labelValue(m.Default))
	}
	return l.add(prefix+"_group", labelValue(m.Group)).
		add(prefix+"_kind", labelValue(strings.ToLower(m.Kind))).
		add(prefix+"_name", labelValue(m.Name))
}

// srvLabels adds the server labels (srv_group, srv_kind, srv_name,
// srv_port) of an inbound port's policy.
func srvLabels(l *labels, srv *authz.Server, port uint16) *labels {
	var m authz.Meta
	if srv != nil {
		m = srv.Meta
	}
	return metaLabels(l, "srv", m).add("srv_port", strconv.Itoa(int(port)))
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

// dstLabels adds the dst_* labels of an endpoint's discovery metric
// labels.
func dstLabels(l *labels, ml map[string]string) *labels {
	if len(ml) == 0 {
		return l
	}
	seen := ""
	for _, k := range dstLabelKeys {
		if v := ml[k.key]; v != "" && k.name != seen {
			l.add(k.name, labelValue(v))
			seen = k.name
		}
	}
	return l
}
