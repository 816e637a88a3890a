//go:build clusterintegration

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var rateLimitGVR = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "httplocalratelimitpolicies"}

// rateLimitPerSecond is the per-identity limit of step 3h.
const rateLimitPerSecond = 2

// rateLimitPolicy is a Server on backend's HTTP port admitting client, and
// an HTTPLocalRateLimitPolicy giving each client identity
// rateLimitPerSecond requests a second (per identity, not total, so that
// the kubelet's probes, which have no identity, never share client's
// bucket).
func (m *mesh) rateLimitPolicy() []policyObject {
	return []policyObject{
		{serverGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
			"metadata": map[string]any{"name": "backend-http-rl"},
			"spec": map[string]any{
				"podSelector":   map[string]any{"matchLabels": map[string]any{"app": "backend"}},
				"port":          httpPort,
				"proxyProtocol": "HTTP/1",
			},
		}},
		{meshTLSGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "MeshTLSAuthentication",
			"metadata": map[string]any{"name": "client-rl"},
			"spec":     map[string]any{"identities": []any{identityOf("client", m.app)}},
		}},
		{authzGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "AuthorizationPolicy",
			"metadata": map[string]any{"name": "backend-http-rl-from-client"},
			"spec": map[string]any{
				"targetRef": map[string]any{"group": "policy.linkerd.io", "kind": "Server", "name": "backend-http-rl"},
				"requiredAuthenticationRefs": []any{
					map[string]any{"group": "policy.linkerd.io", "kind": "MeshTLSAuthentication", "name": "client-rl"},
				},
			},
		}},
		{rateLimitGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "HTTPLocalRateLimitPolicy",
			"metadata": map[string]any{"name": "backend-rl"},
			"spec": map[string]any{
				"targetRef": map[string]any{"group": "policy.linkerd.io", "kind": "Server", "name": "backend-http-rl"},
				"identity":  map[string]any{"requestsPerSecond": rateLimitPerSecond},
			},
		}},
	}
}

// rateLimited applies rateLimitPolicy and checks that backend's proxy
// answers client 429 past the limit, with Linkerd's l5d-proxy-error
// message and counter, admits no more than the limit's bucket allows, and
// lets everything through again once the policy is deleted.
func (m *mesh) rateLimited(t *testing.T) {
	e := m.e
	client, backend := m.pods["client"], m.pods["backend"]
	marker := "weft-rl-" + randomSuffix()
	backendURL := fmt.Sprintf("http://backend:%d/", httpPort)
	objs := m.rateLimitPolicy()

	t.Cleanup(func() { m.deleteObjects(t, m.app, objs) })
	ctx := timeout(t, time.Minute)
	for _, p := range objs {
		_, err := e.dyn.Resource(p.gvr).Namespace(m.app).Create(ctx, &unstructured.Unstructured{Object: p.obj}, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s", p.obj["kind"])
	}
	// The objects reach the controller one by one; the limit is in force
	// when client sees a 429.
	eventually(t, time.Minute, "client rate-limited", func(ctx context.Context) error {
		c := e.call(t, client, backendURL, marker, 10)
		if c.Codes["429"] == 0 {
			return fmt.Errorf("no 429 in %+v", c)
		}
		return nil
	})

	// In force: every call is admitted or refused with 429, and no more
	// are admitted than a full bucket plus what it gains meanwhile.
	const n = 40
	start := time.Now()
	c := e.call(t, client, backendURL, marker, n)
	elapsed := time.Since(start)
	t.Logf("%d calls in %s: %+v", n, elapsed.Round(time.Millisecond), c)
	assert.Equal(t, n, c.OK+c.Codes["429"], "only admitted calls and 429s: %+v", c)
	assert.Positive(t, c.Codes["429"], "past the limit: 429")
	if assert.NotEmpty(t, c.Errors) {
		assert.Contains(t, c.Errors[0], "429: Too Many Requests: per-identity rate limit exceeded: 2rps", "Linkerd's message")
	}
	assert.LessOrEqual(t, float64(c.OK), rateLimitPerSecond*(1+elapsed.Seconds())+1, "admitted at most a bucket and its refill")

	eventually(t, time.Minute, "backend's proxy counts the refusals", func(ctx context.Context) error {
		ms, err := e.proxyMetrics(ctx, backend)
		if err != nil {
			return err
		}
		got := sum(ms, "inbound_http_local_ratelimit_total", map[string]string{
			"ratelimit_group": "policy.linkerd.io", "ratelimit_kind": "HTTPLocalRateLimitPolicy", "ratelimit_name": "backend-rl",
			"ratelimit_scope": "identity", "srv_name": "backend-http-rl", "client_id": identityOf("client", m.app),
		})
		if got < float64(c.Codes["429"]) {
			return fmt.Errorf("inbound_http_local_ratelimit_total %v, want at least %d", got, c.Codes["429"])
		}
		return nil
	})

	// Deleted, the limit goes and client's calls all get through.
	m.deleteObjects(t, m.app, objs)
	eventually(t, 30*time.Second, "no limit after the policy is deleted", func(ctx context.Context) error {
		if c := e.call(t, client, backendURL, marker, 2*rateLimitPerSecond+2); c.OK != 2*rateLimitPerSecond+2 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	m.assertNoRestarts(t)
}
