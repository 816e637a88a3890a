package dataplane_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// The server proxy enforces its Server's HTTPLocalRateLimitPolicy over
// real sockets and mesh TLS. Its clock is the test's: it moves only when
// the test moves it, so every window's count of admitted requests follows
// from the limits, however slow the machine.

// idD is a fourth client identity.
const idD = "batch.shop.serviceaccount.identity.linkerd.cluster.local"

// rateLimitMeta names an HTTPLocalRateLimitPolicy as Linkerd's policy
// controller does.
func rateLimitMeta(name string) authz.Meta {
	return authz.Meta{Group: "policy.linkerd.io", Kind: "HTTPLocalRateLimitPolicy", Namespace: "shop", Name: name}
}

// limitedServer is the Server "name" admitting anyone on every path, with
// the rate limit rl (nil for none).
func limitedServer(name string, rl *authz.RateLimit) *inbound.Server {
	rt := prefixRoute("all", "/")
	rt.Authorizations = []authz.Authorization{anyone}
	return authz.ToProto(&authz.Server{Meta: authz.Meta{Group: "policy.linkerd.io", Kind: "Server", Name: name}, Protocol: authz.ProtocolDetect,
		HTTPRoutes: []authz.HTTPRoute{rt}, RateLimit: rl})
}

// startLimitedPair is an httpPair whose server proxy runs on clock.
func startLimitedPair(t *testing.T, clock *fakeClock, srv *inbound.Server) *httpPair {
	return startHTTPPair(t, httpPairOptions{serverPolicy: srv, optsB: []dataplane.Option{dataplane.WithClock(clock.now)}})
}

// clientAs starts one more client proxy, with identity id, in front of
// hp's server proxy, and returns the base URL of its listener.
func (hp *httpPair) clientAs(t *testing.T, id string) string {
	t.Helper()
	mapped := testutil.Listen(t)
	startProxy(t, testConfig(), hp.pki.identity(t, id), hp.resolver, nil,
		dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: hp.target}}})
	return "http://" + mapped.Addr().String()
}

// sendN sends n requests one after the other and returns their statuses;
// every 429 must carry refusal, Linkerd's message, in l5d-proxy-error.
func sendN(t *testing.T, c *http.Client, url string, n int, refusal string) []int {
	t.Helper()
	var got []int
	for range n {
		resp, body := get(t, c, url)
		got = append(got, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			assert.Equal(t, refusal, resp.Header.Get("L5d-Proxy-Error"))
			assert.Contains(t, body, refusal)
		}
	}
	return got
}

const sOK, s429 = http.StatusOK, http.StatusTooManyRequests

func TestRateLimitedServerAnswers429PastItsTotalLimitAndNotBefore(t *testing.T) {
	clock := newFakeClock()
	hp := startLimitedPair(t, clock, limitedServer("web", &authz.RateLimit{Meta: rateLimitMeta("web-rl"), Total: 4}))
	c := h1Client()
	const refusal = "total rate limit exceeded: 4rps"

	assert.Equal(t, []int{sOK, sOK, sOK, sOK, s429}, sendN(t, c, hp.url("/"), 5, refusal), "a full bucket: a burst of 4")
	assert.Equal(t, int32(4), hp.app.requests.Load(), "a refused request never reaches the application")

	clock.advance(250 * time.Millisecond)
	assert.Equal(t, []int{sOK, s429}, sendN(t, c, hp.url("/"), 2, refusal), "a quarter of a second at 4/s: one token")

	clock.advance(500*time.Millisecond - time.Nanosecond)
	assert.Equal(t, []int{sOK, s429}, sendN(t, c, hp.url("/"), 2, refusal), "just under half a second: one token, the second not yet")
	clock.advance(time.Nanosecond)
	assert.Equal(t, []int{sOK, s429}, sendN(t, c, hp.url("/"), 2, refusal), "and now the second")

	clock.advance(time.Hour)
	assert.Equal(t, []int{sOK, sOK, sOK, sOK, s429}, sendN(t, c, hp.url("/"), 5, refusal), "an idle hour refills the bucket, never beyond its size")
	assert.Equal(t, int32(11), hp.app.requests.Load())

	assert.Equal(t, 5.0, hp.b.metric(t, "inbound_http_local_ratelimit_total",
		`srv_group="policy.linkerd.io"`, `srv_kind="server"`, `srv_name="web"`,
		`ratelimit_group="policy.linkerd.io"`, `ratelimit_kind="HTTPLocalRateLimitPolicy"`, `ratelimit_name="web-rl"`, `ratelimit_scope="total"`,
		`tls="true"`, `client_id="`+idA+`"`, `target_addr="127.0.0.1:`))
	assert.Equal(t, 16.0, hp.b.metric(t, "inbound_http_authz_allow_total"), "the limit applies after authorization, which admitted every request")
	assert.Equal(t, 11.0, hp.b.metric(t, "request_total", `direction="inbound"`), "a rate-limited request is not an inbound request")
}

func TestRateLimitCountsEachIdentityAndOverridesNamedServiceAccounts(t *testing.T) {
	clock := newFakeClock()
	rl := &authz.RateLimit{Meta: rateLimitMeta("per-client"), Identity: 2,
		Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 3, Identities: []string{idC}}}}
	hp := startLimitedPair(t, clock, limitedServer("web", rl))
	urlA, urlC, urlD := hp.url("/"), hp.clientAs(t, idC)+"/", hp.clientAs(t, idD)+"/"
	const perID, override = "per-identity rate limit exceeded: 2rps", "override rate limit exceeded: 3rps"

	assert.Equal(t, []int{sOK, sOK, s429}, sendN(t, h1Client(), urlA, 3, perID), "client A: its own bucket")
	assert.Equal(t, []int{sOK, sOK, s429}, sendN(t, h1Client(), urlD, 3, perID), "client D: a bucket of its own, untouched by A's")
	assert.Equal(t, []int{sOK, sOK, sOK, s429}, sendN(t, h1Client(), urlC, 4, override), "client C: the override naming its service account")

	clock.advance(time.Second / 2)
	assert.Equal(t, []int{sOK, s429}, sendN(t, h1Client(), urlA, 2, perID), "half a second at 2/s: one token")
	assert.Equal(t, []int{sOK, s429}, sendN(t, h1Client(), urlC, 2, override), "half a second at 3/s: one token")

	m := func(id string) float64 {
		return hp.b.metric(t, "inbound_http_local_ratelimit_total", `ratelimit_name="per-client"`, `ratelimit_scope="identity"`, `client_id="`+id+`"`)
	}
	assert.Equal(t, 2.0, m(idA))
	assert.Equal(t, 2.0, m(idC), "an override counts under scope identity, as in Linkerd")
	assert.Equal(t, 1.0, m(idD))
	assert.Equal(t, -1.0, hp.b.metric(t, "inbound_http_local_ratelimit_total", `ratelimit_scope="total"`))
}

func TestRateLimitCountsTheTotalFirstEvenForARequestTheIdentityLimitRefuses(t *testing.T) {
	// Linkerd's order: the total bucket takes its token before the
	// client's own limit is asked, and keeps it.
	clock := newFakeClock()
	hp := startLimitedPair(t, clock, limitedServer("web", &authz.RateLimit{Meta: rateLimitMeta("both"), Total: 3, Identity: 2}))
	urlD := hp.clientAs(t, idD) + "/"

	assert.Equal(t, []int{sOK, sOK, s429}, sendN(t, h1Client(), hp.url("/"), 3, "per-identity rate limit exceeded: 2rps"))
	assert.Equal(t, []int{s429}, sendN(t, h1Client(), urlD, 1, "total rate limit exceeded: 3rps"),
		"A's three requests took the three total tokens, the refused one included")
	assert.Equal(t, 1.0, hp.b.metric(t, "inbound_http_local_ratelimit_total", `ratelimit_scope="identity"`, `client_id="`+idA+`"`))
	assert.Equal(t, 1.0, hp.b.metric(t, "inbound_http_local_ratelimit_total", `ratelimit_scope="total"`, `client_id="`+idD+`"`))
}

func TestRateLimitGivesClientsWithoutIdentityOneSharedBucketWhateverHeaderTheySend(t *testing.T) {
	clock := newFakeClock()
	app := startHTTPApp(t)
	pols := dataplane.NewMemoryPolicies()
	// An override for idC that a plaintext client tries to claim with a
	// header: the limit reads the verified certificate only.
	pols.Set(uint32(app.port()), limitedServer("web", &authz.RateLimit{Meta: rateLimitMeta("plain"), Identity: 2,
		Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 100, Identities: []string{idC}}}}))
	in := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) { return netipAddrPort(app.port()), nil }
	b := startProxy(t, testConfig(), newPKI(t).identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in},
		dataplane.WithOriginalDestination(orig), dataplane.WithClock(clock.now))

	// Each request on a connection of its own: two clients are one bucket.
	var got []int
	for range 3 {
		resp, _ := rawExchange(t, in.Addr().String(), "GET / HTTP/1.1\r\nHost: web\r\nL5d-Client-Id: "+idC+"\r\nConnection: close\r\n\r\n")
		got = append(got, resp.StatusCode)
		if resp.StatusCode == s429 {
			assert.Equal(t, "per-identity rate limit exceeded: 2rps", resp.Header.Get("L5d-Proxy-Error"))
		}
	}
	assert.Equal(t, []int{sOK, sOK, s429}, got)
	assert.Equal(t, 1.0, b.metric(t, "inbound_http_local_ratelimit_total", `ratelimit_scope="identity"`, `tls="no_identity"`, `no_tls_reason="no_tls_from_remote"`))
}

// On both of the server proxy's paths for gRPC (onBothGRPCPaths).
func TestRateLimitedGRPCCallGetsResourceExhausted(t *testing.T) {
	onBothGRPCPaths(t, 3, func(t *testing.T, serverOpts ...dataplane.Option) {
		clock := newFakeClock()
		_, port := startGRPCApp(t)
		pk := newPKI(t)
		pols := dataplane.NewMemoryPolicies()
		pols.Set(uint32(port), limitedServer("grpc", &authz.RateLimit{Meta: rateLimitMeta("grpc-rl"), Total: 1}))
		b, client := healthThroughPair(t, pk, pols, port, append(serverOpts, dataplane.WithClock(clock.now))...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "the first call takes the one token")

		var trailer metadata.MD
		_, err = client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		require.Error(t, err)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err))
		assert.Equal(t, "total rate limit exceeded: 1rps", status.Convert(err).Message())
		assert.Equal(t, []string{"total rate limit exceeded: 1rps"}, trailer.Get("l5d-proxy-error"))
		assert.Equal(t, 1.0, b.metric(t, "inbound_http_local_ratelimit_total", `srv_name="grpc"`, `ratelimit_name="grpc-rl"`, `ratelimit_scope="total"`))

		clock.advance(time.Second)
		_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
		assert.NoError(t, err, "a second later, a token again")
	})
}

func TestRateLimitBucketsSurviveAnUpdateWithTheSameLimitsOnly(t *testing.T) {
	clock := newFakeClock()
	rl := &authz.RateLimit{Meta: rateLimitMeta("web-rl"), Total: 2}
	hp := startLimitedPair(t, clock, limitedServer("web", rl))
	port := uint32(hp.app.port())
	c := h1Client()
	assert.Equal(t, []int{sOK, sOK, s429}, sendN(t, c, hp.url("/"), 3, "total rate limit exceeded: 2rps"))

	// The same limits re-sent with another Server name: the proxy applies
	// the update (its refusals count under the new name) and keeps the
	// empty bucket. The clock stands still, so a fresh bucket would admit.
	hp.policies.Set(port, limitedServer("web-v2", rl))
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, _ := get(t, c, hp.url("/"))
		require.Equal(t, s429, resp.StatusCode, "the update must not refill the bucket")
		return hp.b.metric(t, "inbound_http_local_ratelimit_total", `srv_name="web-v2"`) > 0
	}, "the re-sent policy applies")

	// Another limit: new buckets, full.
	hp.policies.Set(port, limitedServer("web-v2", &authz.RateLimit{Meta: rateLimitMeta("web-rl"), Total: 4}))
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, _ := get(t, c, hp.url("/"))
		return resp.StatusCode == sOK
	}, "the new limit applies")
	assert.Equal(t, []int{sOK, sOK, sOK, s429}, sendN(t, c, hp.url("/"), 4, "total rate limit exceeded: 4rps"),
		"the new bucket held four tokens; the request that saw the update took one")

	// No limit any more.
	hp.policies.Set(port, limitedServer("web-v2", nil))
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, _ := get(t, c, hp.url("/"))
		return resp.StatusCode == sOK
	}, "the limit is gone")
	assert.Equal(t, []int{sOK, sOK, sOK, sOK, sOK}, sendN(t, c, hp.url("/"), 5, ""))
}

// TestLinkerdRateLimitLoadsThroughTheProxy runs the loads of Linkerd's
// end-to-end tests (linkerd2 policy-test/tests/e2e_http_local_ratelimit_policy.rs)
// through the proxy pair, over real sockets and mesh TLS, on the proxy's
// clock: 30 seconds of requests, sent in step with the clock instead of
// paced by fortio. Each client's admitted count is what its bucket lets
// through (a full bucket, then its rate), and its refused share lies in
// Linkerd's range.
func TestLinkerdRateLimitLoadsThroughTheProxy(t *testing.T) {
	const seconds = 30
	refusedPct := func(admitted, sent int) int { return 100 * (sent - admitted) / sent }
	// expect is what a bucket of rps lets through from 0 to last.
	expect := func(rps int, last time.Duration) int { return rps + int(last.Seconds()*float64(rps)) }
	// load sends one request from each client every period for 30
	// seconds of the proxy's clock and counts each client's 200s.
	load := func(t *testing.T, clock *fakeClock, period time.Duration, urls map[string]string) (map[string]int, time.Duration) {
		clients := map[string]*http.Client{}
		for name := range urls {
			clients[name] = h1Client()
		}
		got := map[string]int{}
		var last time.Duration
		for at := time.Duration(0); at < seconds*time.Second; at += period {
			for name, u := range urls {
				resp, _ := get(t, clients[name], u)
				switch resp.StatusCode {
				case sOK:
					got[name]++
				case s429:
				default:
					t.Fatalf("%s: status %d", name, resp.StatusCode)
				}
			}
			last = at
			clock.advance(period)
		}
		return got, last
	}

	t.Run("ratelimit_total", func(t *testing.T) {
		clock := newFakeClock()
		hp := startLimitedPair(t, clock, limitedServer("web", &authz.RateLimit{Meta: rateLimitMeta("rl"), Total: 70}))
		got, last := load(t, clock, 10*time.Millisecond, map[string]string{"meshed-id-1": hp.url("/")}) // 100 rps
		assert.InDelta(t, expect(70, last), got["meshed-id-1"], 1)
		r := refusedPct(got["meshed-id-1"], 100*seconds)
		assert.True(t, r >= 25 && r <= 35, "around 30%% refused, got %d%%", r)
	})

	t.Run("ratelimit_identity_and_overrides", func(t *testing.T) {
		clock := newFakeClock()
		app := startHTTPApp(t)
		rl := &authz.RateLimit{Meta: rateLimitMeta("rl"), Total: 70, Identity: 5,
			Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 10, Identities: []string{idC}}}}
		orig := func(net.Conn) (netip.AddrPort, error) { return netipAddrPort(app.port()), nil }
		hp := startHTTPPair(t, httpPairOptions{app: app, serverPolicy: limitedServer("web", rl),
			optsB: []dataplane.Option{dataplane.WithClock(clock.now), dataplane.WithOriginalDestination(orig)}})
		urls := map[string]string{
			"meshed-regular": hp.url("/"),                              // idA
			"meshed-id-1":    hp.clientAs(t, idC) + "/",                // the override
			"unmeshed":       "http://" + hp.inB.Addr().String() + "/", // plaintext, straight to the server proxy
		}
		got, last := load(t, clock, 50*time.Millisecond, urls) // 20 rps each
		assert.InDelta(t, expect(5, last), got["meshed-regular"], 1)
		assert.InDelta(t, expect(10, last), got["meshed-id-1"], 1)
		assert.InDelta(t, expect(5, last), got["unmeshed"], 1)
		for name, want := range map[string][2]int{"meshed-regular": {70, 80}, "meshed-id-1": {45, 55}, "unmeshed": {70, 80}} {
			r := refusedPct(got[name], 20*seconds)
			assert.True(t, r >= want[0] && r <= want[1], "%s: %d%% refused, want %d-%d%%", name, r, want[0], want[1])
		}
		assert.Equal(t, float64(20*seconds-got["meshed-regular"]), hp.b.metric(t, "inbound_http_local_ratelimit_total",
			`ratelimit_scope="identity"`, `client_id="`+idA+`"`))
		assert.Equal(t, float64(20*seconds-got["unmeshed"]), hp.b.metric(t, "inbound_http_local_ratelimit_total",
			`ratelimit_scope="identity"`, `no_tls_reason="no_tls_from_remote"`))
	})
}
