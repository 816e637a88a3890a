//go:build clusterintegration

package cluster_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// sample is one series of a proxy's metrics.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// proxyMetrics reads pod's proxy metrics from its admin port.
func (e *env) proxyMetrics(ctx context.Context, pod corev1.Pod) ([]sample, error) {
	u := fmt.Sprintf("http://%s/metrics", net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(vocab.DefaultAdminPort)))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.nodeHTTP().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	var out []sample
	for name, f := range fams {
		for _, m := range f.Metric {
			s := sample{name: name, labels: map[string]string{}}
			for _, l := range m.Label {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			default:
				continue
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// sum adds the values of the samples named name whose labels include want.
func sum(samples []sample, name string, want map[string]string) float64 {
	total := 0.0
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// peerLabel is the label carrying the peer's verified identity on a
// series of direction dir (Linkerd's names, docs/metrics.md): an inbound
// series names its client, an outbound one the server it reached.
func peerLabel(dir string) string {
	if dir == "inbound" {
		return "client_id"
	}
	return "server_id"
}

// meshedFrom are the labels of series of direction dir whose peer is id
// over mutual TLS.
func meshedFrom(dir, id string) map[string]string {
	return map[string]string{"direction": dir, peerLabel(dir): id, "tls": "true"}
}

// peers lists the distinct peer identities and TLS states of the samples
// named name in direction dir, for messages.
func peers(samples []sample, name, dir string) string {
	seen := map[string]bool{}
	for _, s := range samples {
		if s.name == name && s.labels["direction"] == dir && s.value > 0 {
			seen[fmt.Sprintf("%s=%q tls=%s no_tls_reason=%q", peerLabel(dir), s.labels[peerLabel(dir)], s.labels["tls"], s.labels["no_tls_reason"])] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// identityOf is the mesh identity of a service account.
func identityOf(sa, ns string) string {
	return fmt.Sprintf("%s.%s.serviceaccount.identity.%s.%s", sa, ns, vocab.DefaultControlPlaneNamespace, vocab.DefaultTrustDomain)
}
