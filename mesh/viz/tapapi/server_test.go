package tapapi_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

func shopBackend() *memBackend {
	return &memBackend{targets: []viz.Target{
		target("shop", "web-1", "web", "10.0.0.7"),
		target("shop", "web-2", "web", "10.0.0.8"),
		target("shop", "db-1", "db", "10.0.0.9"),
		target("other", "web-1", "web", "10.0.1.7"),
	}, next: requests(2)}
}

type testServer struct {
	t  *testing.T
	ts *httptest.Server
	fp *frontProxy
}

func newServer(t *testing.T, b tapapi.Backend, fp *frontProxy, az tapapi.Authorizer, opts ...tapapi.Option) *testServer {
	s, err := tapapi.New(b, fp.header, az, opts...)
	require.NoError(t, err)
	return &testServer{t: t, ts: apiServer(t, s), fp: fp}
}

// front is the API server's client: it presents the front-proxy
// certificate.
func (s *testServer) front() *http.Client { return client(s.t, s.ts, &s.fp.client.TLS) }

// with presents cert (none when nil).
func (s *testServer) with(cert *tls.Certificate) *http.Client { return client(s.t, s.ts, cert) }

const deployWeb = "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/deployments/web/tap"

func TestTapStreamsTheSelectedPodsEventsToAnAuthorizedUser(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)

	resp := post(t, ctx, srv.front(), srv.ts.URL+deployWeb, tapapi.Request{PathPrefix: "/items"}, "alice", "devs", "oncall")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	ms := messages(t, resp.Body)
	resp.Body.Close()

	perPod := map[string]int{}
	for _, m := range ms {
		require.NotNil(t, m.Event, "only events: every pod was tapped and nothing dropped: %+v", m)
		perPod[m.Event.Proxy]++
	}
	assert.Equal(t, map[string]int{"shop/web-1": 6, "shop/web-2": 6}, perPod, "both web pods, 2 requests of 3 events each; not db, not the other namespace's web")
	assert.ElementsMatch(t, []string{"shop/web-1", "shop/web-2"}, b.tappedPods())
	assert.Equal(t, []tapapi.Attributes{{User: tapapi.User{Name: "alice", Groups: []string{"devs", "oncall"}}, Namespace: "shop", Resource: "deployments", Name: "web"}}, az.calls(),
		"the user and groups come from the front proxy's headers; the resource from the path")
}

func TestTapOfANamespaceIsAuthorizedOnTheNamespace(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)

	resp := post(t, ctx, srv.front(), srv.ts.URL+"/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/tap", tapapi.Request{}, "alice")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	n := len(messages(t, resp.Body))
	resp.Body.Close()
	assert.Equal(t, 3*6, n, "the three pods of shop")
	assert.Equal(t, []tapapi.Attributes{{User: tapapi.User{Name: "alice"}, Namespace: "shop", Resource: "namespaces", Name: "shop"}}, az.calls())
}

func TestTapRefusesUserHeadersOnAConnectionWithoutTheFrontProxyCertificate(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)

	code, msg := status(t, post(t, ctx, srv.with(nil), srv.ts.URL+deployWeb, tapapi.Request{}, "system:admin", "system:masters"))
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, msg, "no client certificate")
	assert.Empty(t, az.calls(), "headers from an unauthenticated peer never reach authorization")
	assert.Empty(t, b.tappedPods())
}

func TestTapRefusesAClientCertificateFromAnotherCA(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)
	// The allowed common name, from another authority (a mesh identity's,
	// say).
	other := testutil.NewAnchor(t, testutil.CertOptions{Name: "front-proxy-ca"}).Leaf(t, testutil.CertOptions{Name: "front-proxy-client"})

	code, msg := status(t, post(t, ctx, srv.with(&other.TLS), srv.ts.URL+deployWeb, tapapi.Request{}, "system:admin"))
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, msg, "does not chain to the requestheader client CA")
	assert.Empty(t, az.calls())
	assert.Empty(t, b.tappedPods())
}

func TestTapRefusesACertificateOfTheClientCAWhoseNameIsNotAllowed(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)
	someone := fp.ca.Leaf(t, testutil.CertOptions{Name: "kubelet"})

	code, msg := status(t, post(t, ctx, srv.with(&someone.TLS), srv.ts.URL+deployWeb, tapapi.Request{}, "system:admin"))
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, msg, `"kubelet" is not an allowed requestheader name`)
	assert.Empty(t, az.calls())
}

func TestTapRefusesAFrontProxyRequestWithoutAUser(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)

	code, msg := status(t, post(t, ctx, srv.front(), srv.ts.URL+deployWeb, tapapi.Request{}, ""))
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, msg, "no user in X-Remote-User")
	assert.Empty(t, az.calls())
}

func TestTapForbidsAUserWithoutRBACNamingTheResource(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b := newFrontProxy(t), shopBackend()
	az := &authz{allow: func(a tapapi.Attributes) (bool, string, error) { return false, "no RBAC policy matched", nil }}
	srv := newServer(t, b, fp, az)

	code, msg := status(t, post(t, ctx, srv.front(), srv.ts.URL+deployWeb, tapapi.Request{}, "bob"))
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, `user "bob" cannot watch resource "deployments/tap" (web) in API group "tap.weftmesh.io" in the namespace "shop": no RBAC policy matched`, msg)
	assert.Empty(t, b.tappedPods(), "nothing tapped for a forbidden user")
}

func TestTapFailsClosedWhenAuthorizationFails(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b := newFrontProxy(t), shopBackend()
	az := &authz{allow: func(tapapi.Attributes) (bool, string, error) { return true, "", errors.New("API server unreachable") }}
	srv := newServer(t, b, fp, az)

	code, msg := status(t, post(t, ctx, srv.front(), srv.ts.URL+deployWeb, tapapi.Request{}, "alice"))
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, msg, "API server unreachable")
	assert.Empty(t, b.tappedPods())
}

func TestTapRefusesBadRequestsNamingWhatIsWrong(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, b, az := newFrontProxy(t), shopBackend(), &authz{}
	srv := newServer(t, b, fp, az)
	for _, tc := range []struct {
		name, path string
		body       any
		code       int
		msg        string
	}{
		{"unknown field", deployWeb, map[string]any{"pathPrefx": "/"}, http.StatusBadRequest, `unknown field "pathPrefx"`},
		{"oversized body", deployWeb, map[string]any{"pathPrefix": strings.Repeat("a", tapapi.MaxRequestBytes)}, http.StatusBadRequest, "over 16384 bytes"},
		{"control characters", deployWeb, tapapi.Request{Authority: "a\r\nb"}, http.StatusBadRequest, "authority: invalid UTF-8 or control characters"},
		{"unknown resource", "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/secrets/x/tap", tapapi.Request{}, http.StatusNotFound, `cannot tap "secrets"`},
		{"bad name", "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/Shop/tap", tapapi.Request{}, http.StatusNotFound, `name "Shop"`},
		{"no pods", "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/deployments/nope/tap", tapapi.Request{}, http.StatusNotFound, "no meshed pods match deployments/nope in namespace shop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := status(t, post(t, ctx, srv.front(), srv.ts.URL+tc.path, tc.body, "alice"))
			assert.Equal(t, tc.code, code)
			assert.Contains(t, msg, tc.msg)
		})
	}
	assert.Empty(t, b.tappedPods())
}

func TestTapBoundsTheTapsOneUserHoldsOpen(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, az := newFrontProxy(t), &authz{}
	b := shopBackend()
	b.next, b.hold = nil, true
	b.opened, b.closed = make(chan string, 8), make(chan string, 8)
	l := tapapi.DefaultLimits()
	l.TapsPerUser = 1
	srv := newServer(t, b, fp, az, tapapi.WithLimits(l))
	pod := "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/pods/db-1/tap"

	tapCtx, cancel := context.WithCancel(ctx)
	first := post(t, tapCtx, srv.front(), srv.ts.URL+pod, tapapi.Request{}, "alice")
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Equal(t, "shop/db-1", <-b.opened)

	code, msg := status(t, post(t, ctx, srv.front(), srv.ts.URL+pod, tapapi.Request{}, "alice"))
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Contains(t, msg, `user "alice" holds 1 taps open`)

	other := post(t, ctx, srv.front(), srv.ts.URL+pod, tapapi.Request{}, "carol")
	assert.Equal(t, http.StatusOK, other.StatusCode, "the bound is per user")
	require.Equal(t, "shop/db-1", <-b.opened)
	other.Body.Close()
	require.Equal(t, "shop/db-1", <-b.closed, "a reader that leaves ends its tap")

	cancel()
	first.Body.Close()
	require.Equal(t, "shop/db-1", <-b.closed)
	// The slot is free once the first tap's handler has returned, which
	// follows the close of its stream; poll for the observable state.
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp := post(t, ctx, srv.front(), srv.ts.URL+pod, tapapi.Request{}, "alice")
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "alice may tap again once her tap ended")
}

func TestTapDropsAndCountsWhatASlowReaderCannotTake(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	fp, az := newFrontProxy(t), &authz{}
	// Far more than the connection's buffers hold: the server's writes
	// block while the reader waits.
	const n = 100_000
	exhausted := make(chan struct{})
	gen := requests(n)
	b := &memBackend{targets: []viz.Target{target("shop", "db-1", "db", "10.0.0.9")}, next: func(t viz.Target, i int) (viz.Event, bool) {
		e, ok := gen(t, i)
		if !ok {
			close(exhausted)
		}
		return e, ok
	}}
	l := tapapi.DefaultLimits()
	l.Queue, l.EventsPerSecond = 8, 1<<30
	srv := newServer(t, b, fp, az, tapapi.WithLimits(l))

	resp := post(t, ctx, srv.front(), srv.ts.URL+"/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/pods/db-1/tap", tapapi.Request{}, "alice")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	select {
	case <-exhausted: // the proxy's side never waited for the reader
	case <-ctx.Done():
		t.Fatal("the tap's reader of the proxy was held by the slow client")
	}
	var events, dropped uint64
	for _, m := range messages(t, resp.Body) {
		if m.Event != nil {
			events++
		}
		dropped += m.Dropped
	}
	resp.Body.Close()
	assert.Positive(t, dropped, "the queue of 8 overflowed while the reader waited")
	assert.Equal(t, uint64(3*n), events+dropped, "every event is either sent or counted as dropped")
}

func TestTapEndsWhenTheReaderStopsReading(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	fp, az := newFrontProxy(t), &authz{}
	b := &memBackend{targets: []viz.Target{target("shop", "db-1", "db", "10.0.0.9")},
		next: func(t viz.Target, i int) (viz.Event, bool) { return requests(1<<40)(t, i) }, closed: make(chan string, 1)}
	l := tapapi.DefaultLimits()
	l.EventsPerSecond, l.WriteTimeout = 1<<30, 200*time.Millisecond
	srv := newServer(t, b, fp, az, tapapi.WithLimits(l))

	resp := post(t, ctx, srv.front(), srv.ts.URL+"/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/pods/db-1/tap", tapapi.Request{}, "alice")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	select {
	case <-b.closed: // the write deadline passed, the tap was ended
	case <-ctx.Done():
		t.Fatal("a reader that never reads held its tap open")
	}
}

func TestDiscoveryDescribesTheAPIWithoutAuthentication(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	fp, az := newFrontProxy(t), &authz{}
	srv := newServer(t, shopBackend(), fp, az)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.ts.URL+"/apis/tap.weftmesh.io/v1alpha1", nil)
	require.NoError(t, err)
	resp, err := srv.with(nil).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		GroupVersion string `json:"groupVersion"`
		Resources    []struct {
			Name  string   `json:"name"`
			Verbs []string `json:"verbs"`
		} `json:"resources"`
	}
	require.NoError(t, jsonDecode(resp, &list))
	assert.Equal(t, "tap.weftmesh.io/v1alpha1", list.GroupVersion)
	var names []string
	for _, r := range list.Resources {
		names = append(names, r.Name)
		assert.Equal(t, []string{"watch"}, r.Verbs)
	}
	assert.Equal(t, []string{"daemonsets/tap", "deployments/tap", "jobs/tap", "namespaces/tap", "pods/tap", "statefulsets/tap"}, names)
	assert.Empty(t, az.calls())
}
