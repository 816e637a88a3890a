package inbound

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// fakeStream is a FrameStream that records what the proxy writes.
type fakeStream struct {
	ctx    context.Context
	path   string
	fields []hpack.HeaderField
	body   io.ReadCloser

	status        int
	head, trailer []hpack.HeaderField
	headEnded     bool
	data          bytes.Buffer
	ended         bool
	reset         http2.ErrCode
}

func (s *fakeStream) Context() context.Context    { return s.ctx }
func (s *fakeStream) Method() string              { return http.MethodPost }
func (s *fakeStream) Authority() string           { return "app.test:8080" }
func (s *fakeStream) Path() string                { return s.path }
func (s *fakeStream) Fields() []hpack.HeaderField { return s.fields }
func (s *fakeStream) Body() io.ReadCloser         { return s.body }
func (s *fakeStream) WriteHeader(status int, fields []hpack.HeaderField, end bool) error {
	s.status, s.head, s.headEnded = status, append([]hpack.HeaderField(nil), fields...), end
	return nil
}
func (s *fakeStream) Write(p []byte) error { s.data.Write(p); return nil }
func (s *fakeStream) Flush() error         { return nil }
func (s *fakeStream) End(trailers []hpack.HeaderField) error {
	s.trailer, s.ended = append([]hpack.HeaderField(nil), trailers...), true
	return nil
}
func (s *fakeStream) Reset(code http2.ErrCode) { s.reset = code }

// fieldsApp is an application answering every frame-path request with
// a header, one message and trailers, each carrying mesh and hop-by-hop
// fields besides its own; it keeps the request it got.
type fieldsApp struct{ got *FieldRequest }

func (a *fieldsApp) roundTrip(_ context.Context, req *FieldRequest, _ netip.AddrPort) (FieldResponse, error) {
	a.got = req
	body, _ := io.ReadAll(req.Body)
	trailers := []hpack.HeaderField{{Name: "grpc-status", Value: "0"}, {Name: "l5d-proxy-error", Value: "forged"},
		{Name: "weft-x", Value: "forged"}, {Name: "x-t", Value: "kept"}}
	return FieldResponse{
		Status: http.StatusOK,
		Fields: []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}, {Name: "l5d-server-id", Value: "forged"},
			{Name: "weft-deny-reason", Value: "forged"}, {Name: "proxy-authenticate", Value: "Basic"}, {Name: "x-h", Value: "kept"}},
		Body:     io.NopCloser(bytes.NewReader(body)),
		Trailers: fixedTrailers(trailers),
	}, nil
}

// fixedTrailers is a TrailerSource with the same trailers every time.
type fixedTrailers []hpack.HeaderField

func (t fixedTrailers) Trailers() []hpack.HeaderField { return t }

func grpcFields(extra ...hpack.HeaderField) []hpack.HeaderField {
	return append([]hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}, extra...)
}

func names(fields []hpack.HeaderField) []string {
	var out []string
	for _, f := range fields {
		out = append(out, f.Name)
	}
	return out
}

// On the frame path too, a client's mesh fields never reach the
// application (l5d-client-id is the identity mesh TLS verified, once),
// and the application's mesh and hop-by-hop fields never reach the
// client, in the header or the trailers; a peer proxy's
// l5d-dst-canonical is asked of discovery.
func TestTheFramePathKeepsMeshFieldsFromTheApplicationAndTheClient(t *testing.T) {
	const verified = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	for _, c := range []struct {
		name   string
		peer   authz.Conn
		proxy  bool
		wantID string
		asks   bool
	}{
		{"unmeshed client", authz.Conn{IP: netip.MustParseAddr("10.0.0.9")}, false, "", false},
		{"peer proxy", authz.Conn{IP: netip.MustParseAddr("10.0.0.9"), TLS: true, Identity: verified}, true, verified, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			h := newTestHTTP(netip.MustParseAddr("127.0.0.1"), func(_ context.Context, name, _, _ string) (string, string, []route.ResponseClass) {
				asked = append(asked, name)
				return "", route.DefaultName, nil
			})
			app := &fieldsApp{}
			h.AppH2Fields = app.roundTrip
			st := &fakeStream{ctx: context.Background(), path: "/pkg.Svc/Call", body: io.NopCloser(strings.NewReader("message")),
				fields: grpcFields(
					hpack.HeaderField{Name: "l5d-client-id", Value: "admin.shop.serviceaccount.identity.linkerd.cluster.local"},
					hpack.HeaderField{Name: "l5d-dst-canonical", Value: "payments.shop.svc.cluster.local:8080"},
					hpack.HeaderField{Name: "weft-anything", Value: "forged"},
					hpack.HeaderField{Name: "x-kept", Value: "yes"})}
			conn := &Conn{Port: 8080, Peer: c.peer, FromProxy: c.proxy}
			h.ServeFrames(st, conn)

			require.NotNil(t, app.got, "the application got the request (status %d, %v)", st.status, st.head)
			want := []string{"content-type", "te", "x-kept"}
			if c.wantID != "" {
				want = append(want, "l5d-client-id")
				assert.Equal(t, c.wantID, httpcore.FieldValue(app.got.Fields, "l5d-client-id"), "l5d-client-id is the verified identity")
			}
			assert.Equal(t, want, names(app.got.Fields), "what the application sees")
			assert.Equal(t, "/pkg.Svc/Call", app.got.Path)
			if c.asks {
				assert.Equal(t, []string{"payments.shop.svc.cluster.local:8080"}, asked)
			} else {
				assert.Empty(t, asked)
			}

			assert.Equal(t, http.StatusOK, st.status)
			assert.False(t, st.headEnded)
			assert.Equal(t, []string{"content-type", "x-h"}, names(st.head), "the client's header")
			assert.Equal(t, "message", st.data.String())
			assert.True(t, st.ended)
			assert.Equal(t, []string{"grpc-status", "x-t"}, names(st.trailer), "the client's trailers")
		})
	}
}

// A header match of the policy is evaluated on the frame path from the
// request's fields: the call with the header is admitted, the one
// without it matches no route and is answered PERMISSION_DENIED with the
// reason, trailers-only, without reaching the application.
func TestTheFramePathEvaluatesHeaderMatches(t *testing.T) {
	h := newTestHTTP(netip.MustParseAddr("127.0.0.1"), nil)
	srv := &authz.Server{Meta: authz.Meta{Kind: "Server", Name: "grpc"}, Protocol: authz.ProtocolGRPC,
		GRPCRoutes: []authz.GRPCRoute{{Meta: authz.Meta{Kind: "GRPCRoute", Name: "canary"}, Rules: []authz.GRPCRule{{Matches: []authz.GRPCMatch{{
			Headers: []authz.ValueMatch{{Name: "x-canary", Exact: "yes"}}}}}},
			Authorizations: []authz.Authorization{{Meta: authz.DefaultMeta("all-unauthenticated"), Networks: authz.AllNetworks(),
				Authentication: authz.Authentication{Kind: authz.Unauthenticated}}}}}}
	require.True(t, matchesHeaders(srv))
	pol := &Policy{Srv: srv}
	h.Policy = func(context.Context, uint32) (*Policy, error) { return pol, nil }
	conn := &Conn{Port: 8080, Peer: authz.Conn{IP: netip.MustParseAddr("10.0.0.9")}}

	app := &fieldsApp{}
	h.AppH2Fields = app.roundTrip
	st := &fakeStream{ctx: context.Background(), path: "/pkg.Svc/Call", body: io.NopCloser(strings.NewReader("")),
		fields: grpcFields(hpack.HeaderField{Name: "x-canary", Value: "yes"})}
	h.ServeFrames(st, conn)
	require.NotNil(t, app.got, "admitted: %v", st.head)

	app.got = nil
	st = &fakeStream{ctx: context.Background(), path: "/pkg.Svc/Call", body: io.NopCloser(strings.NewReader("")), fields: grpcFields()}
	h.ServeFrames(st, conn)
	assert.Nil(t, app.got, "denied before the application")
	assert.Equal(t, http.StatusOK, st.status)
	assert.True(t, st.headEnded, "trailers-only")
	assert.Equal(t, "7", httpcore.FieldValue(st.head, "grpc-status"))
	assert.Equal(t, authz.ReasonNoRoute.String(), httpcore.FieldValue(st.head, "weft-deny-reason"))
	assert.Equal(t, "no-route: no route of the server matches the request", httpcore.FieldValue(st.head, "l5d-proxy-error"))
}

// AcceptGRPC takes plain gRPC calls only; whatever the http path treats
// specially goes there.
func TestAcceptGRPCTakesPlainGRPCCallsOnly(t *testing.T) {
	call := func(path string, extra ...hpack.HeaderField) []hpack.HeaderField {
		return append([]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: "app"}, {Name: ":path", Value: path}}, extra...)
	}
	ct := hpack.HeaderField{Name: "content-type", Value: "application/grpc"}
	for _, c := range []struct {
		name   string
		fields []hpack.HeaderField
		want   bool
	}{
		{"grpc", call("/pkg.Svc/Call", ct), true},
		{"grpc+proto", call("/pkg.Svc/Call", hpack.HeaderField{Name: "content-type", Value: "application/grpc+proto"}), true},
		{"grpc-web", call("/pkg.Svc/Call", hpack.HeaderField{Name: "content-type", Value: "application/grpc-web"}), false},
		{"no content-type", call("/pkg.Svc/Call"), false},
		{"two content-types", call("/pkg.Svc/Call", ct, ct), false},
		{"GET", append([]hpack.HeaderField{{Name: ":method", Value: "GET"}}, call("/pkg.Svc/Call", ct)[1:]...), false},
		{"a query", call("/pkg.Svc/Call?x=1", ct), false},
		{"an escaped path", call("/pkg.Svc/Ca%6cl", ct), false},
		{"l5d-orig-proto", call("/pkg.Svc/Call", ct, hpack.HeaderField{Name: "l5d-orig-proto", Value: "HTTP/1.1"}), false},
		{"content-length", call("/pkg.Svc/Call", ct, hpack.HeaderField{Name: "content-length", Value: "5"}), false},
		{"proxy-authorization", call("/pkg.Svc/Call", ct, hpack.HeaderField{Name: "proxy-authorization", Value: "x"}), false},
	} {
		assert.Equal(t, c.want, AcceptGRPC(c.fields), c.name)
	}
}
