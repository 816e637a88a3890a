//go:build clusterintegration

package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/vocab"
)

// otlpPort is the collector's OTLP/gRPC port.
const otlpPort = 4317

// span is one span as testapp's collector mode serves it (/spans).
type span struct {
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentSpanId"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	Attributes map[string]string `json:"attributes"`
	Resource   map[string]string `json:"resource"`
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tracing deploys a meshed collector (testapp --otlp) in a namespace of
// its own and, in a namespace annotated with Linkerd's trace-collector
// annotations, a client and a backend; a request from the client carrying
// a sampled W3C traceparent gives one span from each proxy, both exported
// over mesh TLS through the collector's proxy, chained caller -> client
// proxy -> server proxy -> backend, with the resource attributes
// docs/tracing.md promises; an unsampled request gives none.
func (m *mesh) tracing(t *testing.T) {
	e := m.e
	colNS := e.appNamespace(t, t.Cleanup, "tracing", true)
	e.deployAppPorts(t, colNS, "collector", []corev1.ServicePort{{Name: "otlp", Port: otlpPort, TargetPort: intstr.FromInt32(otlpPort)}},
		"--otlp", fmt.Sprintf(":%d", otlpPort))
	collectorAddr := fmt.Sprintf("collector.%s:%d", colNS, otlpPort)
	ns := e.namespaceWith(t, t.Cleanup, "traced", map[string]string{
		vocab.AnnotationInject:                       vocab.InjectEnabled,
		vocab.AnnotationTraceCollector:               collectorAddr,
		vocab.AnnotationTraceCollectorServiceAccount: "collector",
	})
	e.deployApp(t, ns, "backend")
	e.deployApp(t, ns, "client")
	eventually(t, 5*time.Minute, "the collector rolled out", func(ctx context.Context) error { return e.rolledOut(ctx, colNS, "collector") })
	for _, d := range []string{"backend", "client"} {
		eventually(t, 5*time.Minute, d+" rolled out", func(ctx context.Context) error { return e.rolledOut(ctx, ns, d) })
	}
	collector, client, backend := e.onePod(t, colNS, "collector"), e.onePod(t, ns, "client"), e.onePod(t, ns, "backend")

	// The injector read the namespace's annotations.
	for _, p := range []corev1.Pod{client, backend} {
		env := map[string]string{}
		for _, c := range p.Spec.InitContainers {
			if c.Name == vocab.ProxyContainerName {
				for _, v := range c.Env {
					env[v.Name] = v.Value
				}
			}
		}
		assert.Equal(t, collectorAddr, env[vocab.EnvTraceCollectorAddr], "%s's proxy exports to the collector", p.Name)
		assert.Equal(t, identityOf("collector", colNS), env[vocab.EnvTraceCollectorIdentity], "%s's proxy expects the collector's identity", p.Name)
	}
	for _, p := range []corev1.Pod{client, backend} {
		eventually(t, 2*time.Minute, p.Name+"'s proxy has a certificate", func(ctx context.Context) error {
			ms, err := e.proxyMetrics(ctx, p)
			if err != nil {
				return err
			}
			if sum(ms, "identity_cert_expiration_timestamp_seconds", nil) <= float64(time.Now().Unix()) {
				return fmt.Errorf("no valid certificate yet")
			}
			return nil
		})
	}

	backendURL := fmt.Sprintf("http://backend:%d/", httpPort)
	marker := "weft-trace-" + randomSuffix()
	received := "X-Received-Traceparent"
	// First a request whose caller did not sample: the proxies pass the
	// context on with their own span ids and record nothing.
	unsampled, unsampledParent := randomHex(16), randomHex(8)
	c := e.callWith(t, client, backendURL, marker, 1, []string{"traceparent: 00-" + unsampled + "-" + unsampledParent + "-00"}, []string{received})
	require.Equal(t, 1, c.OK, "%+v", c)
	got := strings.Split(c.Headers[received], "-")
	if assert.Len(t, got, 4, "backend received a traceparent: %+v", c) {
		assert.Equal(t, []string{"00", unsampled, "00"}, []string{got[0], got[1], got[3]}, "the unsampled context goes on")
		assert.NotEqual(t, unsampledParent, got[2], "with the proxies' span as the parent")
	}

	// Then a sampled one.
	sampled, callerSpan := randomHex(16), randomHex(8)
	c = e.callWith(t, client, backendURL, marker, 1, []string{"traceparent: 00-" + sampled + "-" + callerSpan + "-01"}, []string{received})
	require.Equal(t, 1, c.OK, "%+v", c)
	backendSaw := c.Headers[received]

	// The proxies export in batches (every five seconds): poll the
	// collector until both spans of the trace are there.
	var spans []span
	eventually(t, time.Minute, "the collector received the client and server spans of the sampled trace", func(ctx context.Context) error {
		spans = nil
		if err := e.control(ctx, collector, "/spans", url.Values{"trace": {sampled}}, &spans); err != nil {
			return err
		}
		if len(spans) < 2 {
			return fmt.Errorf("%d spans: %+v", len(spans), spans)
		}
		return nil
	})
	byKind := map[string][]span{}
	for _, s := range spans {
		byKind[s.Kind] = append(byKind[s.Kind], s)
	}
	require.Len(t, byKind["SPAN_KIND_CLIENT"], 1, "one client span (client's proxy): %+v", spans)
	require.Len(t, byKind["SPAN_KIND_SERVER"], 1, "one server span (backend's proxy): %+v", spans)
	require.Len(t, spans, 2, "%+v", spans)
	cs, ss := byKind["SPAN_KIND_CLIENT"][0], byKind["SPAN_KIND_SERVER"][0]
	t.Logf("client span %+v", cs)
	t.Logf("server span %+v", ss)

	// The chain: caller -> client proxy -> server proxy -> backend.
	assert.Equal(t, callerSpan, cs.ParentID, "the client proxy's span is the caller's child")
	assert.Equal(t, cs.SpanID, ss.ParentID, "the server proxy's span is the client proxy's child")
	assert.Equal(t, "00-"+sampled+"-"+ss.SpanID+"-01", backendSaw, "backend sees the server proxy's span as its parent, sampled")
	assert.NotEqual(t, cs.SpanID, ss.SpanID)

	for _, tc := range []struct {
		s         span
		pod       corev1.Pod
		direction string
	}{{cs, client, "outbound"}, {ss, backend, "inbound"}} {
		assert.Equal(t, "GET /", tc.s.Name, "%s span name", tc.direction)
		assert.Equal(t, tc.direction, tc.s.Attributes["weft.direction"])
		assert.Equal(t, "GET", tc.s.Attributes["http.request.method"], "%s", tc.direction)
		assert.Equal(t, "200", tc.s.Attributes["http.response.status_code"], "%s", tc.direction)
		assert.Equal(t, "/", tc.s.Attributes["url.path"], "%s", tc.direction)
		for k, v := range tc.s.Attributes {
			assert.NotContains(t, v, marker, "no other header is recorded (%s)", k)
		}
		res := tc.s.Resource
		assert.Equal(t, "weft-proxy", res["service.name"], "%s resource", tc.direction)
		assert.Equal(t, tc.pod.Name, res["k8s.pod.name"], "%s resource", tc.direction)
		assert.Equal(t, ns, res["k8s.namespace.name"], "%s resource", tc.direction)
		assert.Equal(t, tc.pod.Status.PodIP, res["k8s.pod.ip"], "%s resource", tc.direction)
		assert.Equal(t, string(tc.pod.UID), res["k8s.pod.uid"], "%s resource", tc.direction)
		assert.Equal(t, vocab.ProxyContainerName, res["k8s.container.name"], "%s resource", tc.direction)
		assert.NotEmpty(t, res["host.name"], "%s resource", tc.direction)
		assert.NotEmpty(t, res["process.pid"], "%s resource", tc.direction)
	}

	// The unsampled request ended before the sampled one began, on the
	// same two proxies, so its spans, had there been any, would have been
	// queued and exported before the sampled ones, which have arrived.
	var none []span
	require.NoError(t, e.control(timeout(t, time.Minute), collector, "/spans", url.Values{"trace": {unsampled}}, &none))
	assert.Empty(t, none, "an unsampled request gives no span")

	// The export went over mesh TLS through the collector's own proxy,
	// which verified each exporting proxy's identity.
	for _, p := range []string{"client", "backend"} {
		id := identityOf(p, ns)
		eventually(t, 30*time.Second, "the collector's proxy saw "+p+"'s export over mTLS", func(ctx context.Context) error {
			ms, err := e.proxyMetrics(ctx, collector)
			if err != nil {
				return err
			}
			if sum(ms, "request_total", meshedFrom("inbound", id)) == 0 {
				return fmt.Errorf("none from %s; seen: %s", id, peers(ms, "request_total", "inbound"))
			}
			return nil
		})
	}
}
