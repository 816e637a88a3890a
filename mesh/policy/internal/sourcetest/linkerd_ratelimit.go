package sourcetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Linkerd's test cases of HTTPLocalRateLimitPolicy (linkerd2 tag
// version-2.20), under their names: the policy-controller index test
// (k8s/index/src/inbound/tests/ratelimit_policy.rs), the Inbound API test
// (policy-test/tests/inbound_api.rs), the status controller's acceptance
// tests (k8s/status/src/tests/ratelimit.rs; Weft writes no status, so
// "accepted" means "served to the proxy" and "not accepted" a problem
// naming the reason), and the admission tests
// (policy-test/tests/admit_http_local_ratelimit_policy.rs; the webhook
// answers with policy.Validate, and a source ignores what it refuses).

// RateLimitPolicy returns an HTTPLocalRateLimitPolicy in NS targeting the
// Server named server, with a total limit (0 for none), an identity limit
// (0 for none) and overrides.
func RateLimitPolicy(name, server string, total, identity int64, overrides ...v1alpha1.Override) *v1alpha1.HTTPLocalRateLimitPolicy {
	rl := &v1alpha1.HTTPLocalRateLimitPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "HTTPLocalRateLimitPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
		Spec: v1alpha1.HTTPLocalRateLimitPolicySpec{
			TargetRef: v1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: gatewayv1.ObjectName(server)},
			Overrides: overrides,
		},
	}
	if total > 0 {
		rl.Spec.Total = &v1alpha1.Limit{RequestsPerSecond: total}
	}
	if identity > 0 {
		rl.Spec.Identity = &v1alpha1.Limit{RequestsPerSecond: identity}
	}
	return rl
}

// ServiceAccountOverride limits the named ServiceAccount (in the
// policy's namespace when ns is empty) to rps.
func ServiceAccountOverride(rps int64, name, ns string) v1alpha1.Override {
	ref := v1alpha1.NamespacedTargetRef{Kind: "ServiceAccount", Name: gatewayv1.ObjectName(name)}
	if ns != "" {
		ref.Namespace = &ns
	}
	return v1alpha1.Override{RequestsPerSecond: rps, ClientRefs: []v1alpha1.NamespacedTargetRef{ref}}
}

// Identity returns the mesh identity of a ServiceAccount in ns.
func Identity(sa, ns string) string {
	return sa + "." + ns + ".serviceaccount.identity.weft.cluster.local"
}

// rateLimitOf returns the rate limit the index serves for web-0's port
// http, or nil.
func rateLimitOf(x *policy.Indexer) *authz.RateLimit {
	srv, ok := x.Index().Lookup(web, 8080)
	if !ok {
		return nil
	}
	return srv.RateLimit
}

// eventuallyRateLimit waits until the served rate limit is named name
// ("" for none).
func eventuallyRateLimit(t *testing.T, x *policy.Indexer, name, msg string) *authz.RateLimit {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() bool {
		rl := rateLimitOf(x)
		if name == "" {
			return rl == nil
		}
		return rl != nil && rl.Meta.Name == name
	}, msg)
	return rateLimitOf(x)
}

func runLinkerdRateLimit(t *testing.T, newHarness Factory) {
	t.Run("ratelimit_policy_with_server", func(t *testing.T) {
		h := newHarness(t, Base()...)
		x := running(t, h.Source())
		eventually(t, x, policy.Client{Identity: GatewayID}, intstr.FromInt32(8080), nil, authz.Deny, "the Server is indexed")
		assert.Nil(t, rateLimitOf(x), "no rate limit before the policy exists")

		rl := RateLimitPolicy("ratelimit-0", "web-http", 1000, 0, ServiceAccountOverride(500, "client-0", ""))
		h.Set(t, with(Base(), rl)...)
		got := eventuallyRateLimit(t, x, "ratelimit-0", "the policy's limits are served for the Server's port")
		assert.Equal(t, &authz.RateLimit{
			Meta:      authz.Meta{Group: "policy.linkerd.io", Kind: "HTTPLocalRateLimitPolicy", Namespace: NS, Name: "ratelimit-0"},
			Total:     1000,
			Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 500, Identities: []string{Identity("client-0", NS)}}},
		}, got)
		srv, _ := x.Index().Lookup(web, 8080)
		assert.Equal(t, authz.ProtocolHTTP1, srv.Protocol)
	})

	t.Run("http_local_rate_limit_policy", func(t *testing.T) {
		rl := RateLimitPolicy("rl-0", "web-http", 1000, 0, ServiceAccountOverride(200, "sa-0", ""))
		h := newHarness(t, with(Base(), rl)...)
		x := running(t, h.Source())
		eventuallyRateLimit(t, x, "rl-0", "the policy is indexed")
		client := serve(t, x)
		ctx := testutil.Context(t, 10*time.Second)
		stream, err := client.WatchPort(ctx, &inbound.PortSpec{Workload: NS + ":web-0", Port: 8080})
		require.NoError(t, err)
		first, err := stream.Recv()
		require.NoError(t, err)
		want := &inbound.HttpLocalRateLimit{
			Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
				Group: "policy.linkerd.io", Kind: "HTTPLocalRateLimitPolicy", Name: "rl-0"}}},
			Total: &inbound.HttpLocalRateLimit_Limit{RequestsPerSecond: 1000},
			Overrides: []*inbound.HttpLocalRateLimit_Override{{
				Limit: &inbound.HttpLocalRateLimit_Limit{RequestsPerSecond: 200},
				Clients: &inbound.HttpLocalRateLimit_Override_ClientIdentities{
					Identities: []*inbound.Identity{{Name: Identity("sa-0", NS)}}},
			}},
		}
		http1 := first.GetProtocol().GetHttp1()
		require.NotNil(t, http1, "an HTTP/1 Server is served as Http1")
		assert.True(t, proto.Equal(want, http1.GetLocalRateLimit()), "got %v", http1.GetLocalRateLimit())

		// The proxy reads back what was sent.
		srv, err := authz.FromProto(first)
		require.NoError(t, err)
		require.NotNil(t, srv.RateLimit)
		assert.Equal(t, uint32(1000), srv.RateLimit.Total)

		// Deleting the policy takes the limit away on the open stream.
		h.Set(t, Base()...)
		next, err := stream.Recv()
		require.NoError(t, err)
		assert.Nil(t, next.GetProtocol().GetHttp1().GetLocalRateLimit())
	})

	t.Run("ratelimit_accepted", func(t *testing.T) {
		h := newHarness(t, with(Base(), RateLimitPolicy("rl-1", "web-http", 100, 10))...)
		x := running(t, h.Source())
		got := eventuallyRateLimit(t, x, "rl-1", "the policy applies to its Server")
		assert.Equal(t, uint32(100), got.Total)
		assert.Equal(t, uint32(10), got.Identity)
		assert.False(t, hasProblem(x, "rl-1"), "an accepted policy has no problem: %v", x.Index().Problems())
	})

	t.Run("ratelimit_not_accepted_no_matching_target", func(t *testing.T) {
		h := newHarness(t, with(Base(), RateLimitPolicy("rl-1", "server-2", 100, 10))...)
		x := running(t, h.Source())
		eventuallyTrue(t, func() bool { return hasProblem(x, "rl-1", "spec.targetRef", "Server my-app/server-2 not found") },
			"the missing target is reported")
		assert.Nil(t, rateLimitOf(x), "web-http is not limited by a policy that targets another Server")

		// The policy applies once its Server exists.
		srv2 := Server()
		srv2.Name = "server-2"
		srv2.Spec.Port = intstr.FromInt32(9990)
		h.Set(t, with(Base(), RateLimitPolicy("rl-1", "server-2", 100, 10), srv2)...)
		eventuallyTrue(t, func() bool {
			s, ok := x.Index().Lookup(web, 9990)
			return ok && s.RateLimit != nil && s.RateLimit.Meta.Name == "rl-1"
		}, "the policy applies to server-2's port once server-2 exists")
		assert.Nil(t, rateLimitOf(x))
	})

	t.Run("ratelimit_not_accepted_already_exists", func(t *testing.T) {
		rl1 := RateLimitPolicy("rl-1", "web-http", 100, 10)
		rl2 := RateLimitPolicy("rl-2", "web-http", 50, 5)
		h := newHarness(t, with(Base(), rl1)...)
		x := running(t, h.Source())
		eventuallyRateLimit(t, x, "rl-1", "rl-1 applies")

		h.Set(t, with(Base(), rl1, rl2)...)
		eventuallyTrue(t, func() bool { return hasProblem(x, "rl-2", "already has HTTPLocalRateLimitPolicy rl-1") },
			"the second policy for the Server is reported")
		assert.Equal(t, "rl-1", rateLimitOf(x).Meta.Name, "the first one keeps applying")
		assert.False(t, hasProblem(x, "HTTPLocalRateLimitPolicy my-app/rl-1"))

		// The older one wins, whatever the names.
		older := rl2.DeepCopy()
		older.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		newer := rl1.DeepCopy()
		newer.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		h.Set(t, with(Base(), newer, older)...)
		eventuallyRateLimit(t, x, "rl-2", "the older policy applies")

		// Once the one that applies is deleted, the other takes over.
		h.Set(t, with(Base(), newer)...)
		eventuallyRateLimit(t, x, "rl-1", "the remaining policy applies")
	})

	// admit_http_local_ratelimit_policy.rs builds every case from a total
	// of 1000 and an identity limit, with an override for sa-1 in the
	// linkerd namespace.
	admission := func(t *testing.T, rl *v1alpha1.HTTPLocalRateLimitPolicy, wantField string) {
		t.Helper()
		problems := policy.Validate(rl, nil)
		if wantField == "" {
			assert.Empty(t, problems)
		} else if assert.NotEmpty(t, problems, "refused") {
			assert.Equal(t, wantField, problems[0].Field, "%v", problems)
		}
		h := newHarness(t, with(Base(), rl)...)
		x := running(t, h.Source())
		if wantField == "" {
			eventuallyRateLimit(t, x, rl.Name, "an accepted policy applies")
			return
		}
		eventuallyTrue(t, func() bool { return hasProblem(x, "error: ", rl.Name, wantField) }, "the source reports the refused policy")
		assert.Nil(t, rateLimitOf(x), "a refused policy applies to nothing")
	}
	sa1 := ServiceAccountOverride(200, "sa-1", "linkerd")

	t.Run("accepts_valid", func(t *testing.T) {
		admission(t, RateLimitPolicy("test", "web-http", 1000, 100, sa1), "")
	})

	t.Run("rejects_target_ref_deployment", func(t *testing.T) {
		rl := RateLimitPolicy("test", "web-http", 1000, 100, sa1)
		rl.Spec.TargetRef = v1alpha1.TargetRef{Group: "apps", Kind: "Deployment", Name: "web"}
		admission(t, rl, "spec.targetRef")
	})

	t.Run("rejects_identity_rps_higher_than_total", func(t *testing.T) {
		admission(t, RateLimitPolicy("test", "web-http", 1000, 2000, sa1), "spec.identity.requestsPerSecond")
	})

	t.Run("rejects_overrides_rps_higher_than_total", func(t *testing.T) {
		// Linkerd's case also has an identity limit above the total;
		// here the override alone is too high, so that its refusal is
		// the one checked.
		rl := RateLimitPolicy("test", "web-http", 1000, 100, ServiceAccountOverride(2000, "sa-1", "linkerd"))
		admission(t, rl, "spec.overrides[0].requestsPerSecond")
	})
}
