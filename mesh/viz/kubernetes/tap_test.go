package kubernetes_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
	vizk8s "github.com/weftmesh/weft/mesh/viz/kubernetes"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

func TestTargetsCarryTheTapAddressOfProxiesThatServeTap(t *testing.T) {
	proxy := func(env ...corev1.EnvVar) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "weft-proxy", Env: env}}
		}
	}
	cs := fake.NewSimpleClientset(
		pod("web-1", proxy(corev1.EnvVar{Name: "WEFT_PROXY_TAP_ADDR", Value: "0.0.0.0:4190"}, corev1.EnvVar{Name: "WEFT_PROXY_TAP_IDENTITIES", Value: "weft-tap.weft.serviceaccount.identity.weft.cluster.local"})),
		pod("web-2", proxy()),
		pod("web-3", proxy(corev1.EnvVar{Name: "WEFT_PROXY_TAP_ADDR", Value: "0.0.0.0:99999"})),
	)
	ts, err := vizk8s.New(cs, vizk8s.WithNamespace("shop")).Targets(testutil.Context(t, 10*time.Second))
	require.NoError(t, err)
	require.Len(t, ts, 3)
	assert.Equal(t, "10.0.0.7:4190", ts[0].Tap)
	assert.Empty(t, ts[1].Tap, "a proxy without tapper identities serves no tap")
	assert.Empty(t, ts[2].Tap, "a port out of range is no tap address")
}

func TestRequestHeaderFromReadsTheFrontProxySettings(t *testing.T) {
	ca := testutil.NewAnchor(t, testutil.CertOptions{Name: "front-proxy-ca"})
	h, err := vizk8s.RequestHeaderFrom(map[string]string{
		"requestheader-client-ca-file":       string(ca.CertPEM),
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"front-proxy-client"}, h.AllowedNames)
	assert.Equal(t, []string{"X-Remote-User"}, h.UsernameHeaders)
	assert.Equal(t, []string{"X-Remote-Group"}, h.GroupHeaders)
	assert.Equal(t, []string{"X-Remote-Extra-"}, h.ExtraHeaderPrefixes)
	require.NotNil(t, h.ClientCAs)

	for _, tc := range []struct {
		name string
		data map[string]string
		msg  string
	}{
		{"no CA", map[string]string{"requestheader-username-headers": `["X-Remote-User"]`}, "runs without --requestheader-client-ca-file"},
		{"not PEM", map[string]string{"requestheader-client-ca-file": "nope", "requestheader-username-headers": `["X-Remote-User"]`}, "holds no PEM certificate"},
		{"bad list", map[string]string{"requestheader-client-ca-file": string(ca.CertPEM), "requestheader-username-headers": `X-Remote-User`}, "requestheader-username-headers: want a JSON list"},
		{"no user header", map[string]string{"requestheader-client-ca-file": string(ca.CertPEM)}, "requestheader-username-headers is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vizk8s.RequestHeaderFrom(tc.data)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestSubjectAccessReviewsAskForWatchOnTheTapSubresource(t *testing.T) {
	cs := fake.NewSimpleClientset()
	var got *authzv1.SubjectAccessReview
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		got = a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		out := got.DeepCopy()
		out.Status = authzv1.SubjectAccessReviewStatus{Allowed: got.Spec.User == "alice", Reason: "RBAC: no rule"}
		return true, out, nil
	})
	az := vizk8s.SubjectAccessReviews{Client: cs}
	ctx := testutil.Context(t, 10*time.Second)
	ok, _, err := az.Authorize(ctx, tapapi.Attributes{User: tapapi.User{Name: "alice", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"a"}}}, Namespace: "shop", Resource: "deployments", Name: "web"})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, &authzv1.ResourceAttributes{Namespace: "shop", Verb: "watch", Group: "tap.weftmesh.io", Version: "v1alpha1", Resource: "deployments", Subresource: "tap", Name: "web"}, got.Spec.ResourceAttributes)
	assert.Equal(t, []string{"devs"}, got.Spec.Groups)
	assert.Equal(t, authzv1.ExtraValue{"a"}, got.Spec.Extra["scopes"])

	ok, reason, err := az.Authorize(ctx, tapapi.Attributes{User: tapapi.User{Name: "bob"}, Namespace: "shop", Resource: "pods", Name: "web-1"})
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, "RBAC: no rule", reason)

	cs.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd unavailable")
	})
	ok, _, err = az.Authorize(ctx, tapapi.Attributes{User: tapapi.User{Name: "alice"}, Namespace: "shop", Resource: "pods"})
	require.Error(t, err)
	assert.False(t, ok, "an error never allows")
}

// aggregator stands in for the API server's aggregation layer: it
// authenticates bearer tokens, drops any X-Remote-* header the caller
// sent, and proxies to the tap API with the front-proxy certificate and
// the user's name, as kube-apiserver does. Without a tap API
// (tapURL nil) it answers 404 as for an unknown group.
func aggregator(t *testing.T, tapURL *url.URL, frontCert tls.Certificate, users map[string]string) *httptest.Server {
	var proxy *httputil.ReverseProxy
	if tapURL != nil {
		proxy = &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(tapURL)
				r.Out.URL.Path = r.In.URL.Path
				for k := range r.Out.Header {
					if strings.HasPrefix(strings.ToLower(k), "x-remote-") {
						r.Out.Header.Del(k)
					}
				}
				r.Out.Header.Del("Authorization")
				r.Out.Header.Set("X-Remote-User", users[strings.TrimPrefix(r.In.Header.Get("Authorization"), "Bearer ")])
			},
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{frontCert}, InsecureSkipVerify: true}}, //nolint:gosec // the test's own listener
			FlushInterval: -1,
		}
	}
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if proxy == nil || !strings.HasPrefix(r.URL.Path, "/apis/tap.weftmesh.io/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "the server could not find the requested resource"})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	if proxy != nil {
		t.Cleanup(proxy.Transport.(*http.Transport).CloseIdleConnections)
	}
	return s
}

// oneRequest is a tap backend with one pod whose proxy reports one
// request.
type oneRequest struct{}

func (oneRequest) Targets(context.Context, string) ([]viz.Target, error) {
	return []viz.Target{{Namespace: "shop", Pod: "web-1", WorkloadKind: "deployment", Workload: "web", IP: netip.MustParseAddr("10.0.0.7")}}, nil
}

func (oneRequest) Tap(ctx context.Context, t viz.Target, _ viz.TapRequest, _ *viz.Addresses) (tapapi.Stream, error) {
	return &oneStream{ctx: ctx, t: t}, nil
}

type oneStream struct {
	ctx  context.Context
	t    viz.Target
	sent bool
}

func (s *oneStream) Recv() (viz.Event, error) {
	if !s.sent {
		s.sent = true
		return viz.Event{Kind: viz.RequestInit, Proxy: s.t.Key(), Method: "GET", Path: "/items"}, nil
	}
	return viz.Event{}, io.EOF
}

func (s *oneStream) Close() error { return nil }

func restFor(t *testing.T, s *httptest.Server, token string) rest.Interface {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	require.NoError(t, err)
	return cs.Discovery().RESTClient()
}

func TestTapResourceStreamsThroughTheAggregatedAPIAsTheAuthenticatedUser(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	frontCA := testutil.NewAnchor(t, testutil.CertOptions{Name: "front-proxy-ca"})
	front := frontCA.Leaf(t, testutil.CertOptions{Name: "front-proxy-client"})
	var asked []tapapi.Attributes
	az := tapapi.AuthorizerFunc(func(_ context.Context, a tapapi.Attributes) (bool, string, error) {
		asked = append(asked, a)
		return a.User.Name == "alice", "", nil
	})
	srv, err := tapapi.New(oneRequest{}, &tapapi.RequestHeader{ClientCAs: testutil.Pool(frontCA), AllowedNames: []string{"front-proxy-client"}, UsernameHeaders: []string{"X-Remote-User"}}, az)
	require.NoError(t, err)
	tapSrv := httptest.NewUnstartedServer(srv)
	tapSrv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	tapSrv.StartTLS()
	defer tapSrv.Close()
	u, err := url.Parse(tapSrv.URL)
	require.NoError(t, err)
	api := aggregator(t, u, front.TLS, map[string]string{"alice-token": "alice", "bob-token": "bob"})

	src := vizk8s.New(fake.NewSimpleClientset(), vizk8s.WithTapREST(restFor(t, api, "alice-token")))
	web := viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: "shop", Name: "web"}
	s, err := src.TapResource(ctx, web, viz.TapRequest{Filter: viz.Filter{PathPrefix: "/items"}}, nil)
	require.NoError(t, err)
	e, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, "/items", e.Path)
	assert.Equal(t, "shop/web-1", e.Proxy)
	_, err = s.Recv()
	assert.ErrorIs(t, err, io.EOF)
	s.(io.Closer).Close()
	require.Len(t, asked, 1)
	assert.Equal(t, "alice", asked[0].User.Name)

	bob := vizk8s.New(fake.NewSimpleClientset(), vizk8s.WithTapREST(restFor(t, api, "bob-token")))
	_, err = bob.TapResource(ctx, web, viz.TapRequest{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `user "bob" cannot watch resource "deployments/tap" (web) in API group "tap.weftmesh.io" in the namespace "shop"`)

	none := vizk8s.New(fake.NewSimpleClientset(), vizk8s.WithTapREST(restFor(t, aggregator(t, nil, front.TLS, map[string]string{"alice-token": "alice"}), "alice-token")))
	_, err = none.TapResource(ctx, web, viz.TapRequest{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the cluster serves no tap API (APIService v1alpha1.tap.weftmesh.io)")

	_, err = src.TapResource(ctx, viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Name: "web"}, viz.TapRequest{}, nil)
	require.ErrorContains(t, err, "a tap names one namespace")
}
