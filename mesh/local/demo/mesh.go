package demo

import (
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// ProxyFigures are what a workload's proxies report about mutual TLS and
// authorization (summed over its pods).
type ProxyFigures struct {
	Workload string
	// Allowed and Denied count inbound authorization decisions: requests
	// when the proxy authorizes HTTP requests, connections otherwise.
	Allowed, Denied float64
	// From are the verified client identities the proxy let in over mutual
	// TLS; DeniedFrom those it refused.
	From, DeniedFrom []string
	// To are the server identities the proxy verified on its outbound
	// mutual-TLS connections.
	To []string
}

// ReadProxy extracts a ProxyFigures from the families a proxy's registry
// gathers (what its /metrics serves), read with Linkerd's metric names and
// labels: client_id on inbound authorization counters, server_id on
// outbound transport and request counters.
func ReadProxy(workload string, mfs []*dto.MetricFamily) ProxyFigures {
	pf := ProxyFigures{Workload: workload}
	var tcpAllow, tcpDeny, httpAllow, httpDeny float64
	from, denied, to := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := labels(m)
			v := m.GetCounter().GetValue()
			switch mf.GetName() {
			case "inbound_tcp_authz_allow_total", "inbound_http_authz_allow_total", "inbound_http_authz_audit_total":
				if strings.HasPrefix(mf.GetName(), "inbound_tcp") {
					tcpAllow += v
				} else {
					httpAllow += v
				}
				if l["tls"] == "true" && l["client_id"] != "" && v > 0 {
					from[l["client_id"]] = true
				}
			case "inbound_tcp_authz_deny_total", "inbound_http_authz_deny_total", "inbound_http_route_not_found_total":
				if strings.HasPrefix(mf.GetName(), "inbound_tcp") {
					tcpDeny += v
				} else {
					httpDeny += v
				}
				if l["tls"] == "true" && l["client_id"] != "" && v > 0 {
					denied[l["client_id"]] = true
				}
			case "tcp_open_total", "request_total":
				if l["direction"] == "outbound" && l["tls"] == "true" && l["server_id"] != "" && v > 0 {
					to[l["server_id"]] = true
				}
			}
		}
	}
	// An HTTP request is authorized on a connection that was authorized
	// too; count the finer of the two.
	if httpAllow+httpDeny > 0 {
		pf.Allowed, pf.Denied = httpAllow, httpDeny+tcpDeny
	} else {
		pf.Allowed, pf.Denied = tcpAllow, tcpDeny
	}
	pf.From, pf.DeniedFrom, pf.To = keys(from), keys(denied), keys(to)
	return pf
}

// Merge adds o (another pod of the same workload) to pf.
func (pf ProxyFigures) Merge(o ProxyFigures) ProxyFigures {
	pf.Allowed += o.Allowed
	pf.Denied += o.Denied
	pf.From = union(pf.From, o.From)
	pf.DeniedFrom = union(pf.DeniedFrom, o.DeniedFrom)
	pf.To = union(pf.To, o.To)
	return pf
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func union(a, b []string) []string {
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		m[s] = true
	}
	return keys(m)
}

// ShortIdentity turns web.shop.serviceaccount.identity.weft.cluster.local
// into web.shop for narrow columns.
func ShortIdentity(id string) string {
	if i := strings.Index(id, ".serviceaccount.identity."); i > 0 {
		return id[:i]
	}
	return id
}
