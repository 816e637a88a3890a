package tap

import (
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	proxynet "github.com/weftmesh/weft/apis/proxy/net"
	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// decodeTapWire encodes an event as a tap's goroutine does and decodes it
// with the generated types, as a tapper does.
func decodeTapWire(t *testing.T, s *session, it item) *ptap.TapEvent {
	t.Helper()
	var enc encoder
	out := &ptap.TapEvent{}
	require.NoError(t, proto.Unmarshal(enc.encode(s, it), out))
	return out
}

// generatedTapEvent builds the TapEvent of an item with the generated
// types: what the proxy sent before events were written by hand, kept as
// the reference.
func generatedTapEvent(s *session, it item) *ptap.TapEvent {
	tr := it.tr
	meta := func(ls []label) map[string]string {
		m := map[string]string{}
		for _, l := range ls {
			m[l.k] = l.v
		}
		return m
	}
	out := &ptap.TapEvent{
		Source:          genTCPAddr(tr.src),
		Destination:     genTCPAddr(tr.dst),
		ProxyDirection:  tr.direction,
		SourceMeta:      &ptap.TapEvent_EndpointMeta{Labels: meta(tr.srcMeta)},
		DestinationMeta: &ptap.TapEvent_EndpointMeta{Labels: meta(tr.dstMeta)},
	}
	if tr.route != "" {
		out.RouteMeta = &ptap.TapEvent_RouteMeta{Labels: map[string]string{"route": tr.route}}
	}
	id := &ptap.TapEvent_Http_StreamId{Base: s.base, Stream: it.id}
	httpEv := &ptap.TapEvent_Http{}
	switch it.kind {
	case kindRequestInit:
		init := &ptap.TapEvent_Http_RequestInit{
			Id: id, Method: authz.MethodToProto(tr.method), Scheme: genScheme(tr.scheme), Authority: tr.authority, Path: tr.path,
		}
		if s.headers && tr.reqHeader != nil {
			var pseudo [][2]string
			if tr.reqH2 {
				pseudo = [][2]string{{":method", tr.method}, {":scheme", tr.scheme}, {":authority", tr.authority}, {":path", tr.path}}
			}
			init.Headers = genHeaders(pseudo, tr.reqHeader)
		}
		httpEv.Event = &ptap.TapEvent_Http_RequestInit_{RequestInit: init}
	case kindResponseInit:
		ri := &ptap.TapEvent_Http_ResponseInit{Id: id, SinceRequestInit: durationpb.New(tr.headAt.Sub(tr.start)), HttpStatus: uint32(tr.status)}
		if s.headers && tr.respHeader != nil {
			var pseudo [][2]string
			if tr.respH2 {
				pseudo = [][2]string{{":status", strconv.Itoa(tr.status)}}
			}
			ri.Headers = genHeaders(pseudo, tr.respHeader)
		}
		httpEv.Event = &ptap.TapEvent_Http_ResponseInit_{ResponseInit: ri}
	case kindResponseEnd:
		end := &ptap.TapEvent_Http_ResponseEnd{
			Id: id, SinceRequestInit: durationpb.New(tr.sinceRequest), SinceResponseInit: durationpb.New(tr.sinceResponse),
			ResponseBytes: tr.bytes, Eos: &ptap.Eos{},
		}
		switch {
		case tr.resetCode >= 0:
			end.Eos.End = &ptap.Eos_ResetErrorCode{ResetErrorCode: uint32(tr.resetCode)}
		case tr.grpcStatus >= 0:
			end.Eos.End = &ptap.Eos_GrpcStatusCode{GrpcStatusCode: uint32(tr.grpcStatus)}
		}
		if s.headers && tr.trailers != nil {
			end.Trailers = genHeaders(nil, tr.trailers)
		}
		httpEv.Event = &ptap.TapEvent_Http_ResponseEnd_{ResponseEnd: end}
	}
	out.Event = &ptap.TapEvent_Http_{Http: httpEv}
	return out
}

func genTCPAddr(a netip.AddrPort) *proxynet.TcpAddress {
	if !a.IsValid() {
		return nil
	}
	return &proxynet.TcpAddress{Ip: authz.AddrToProto(a.Addr().Unmap()), Port: uint32(a.Port())}
}

func genScheme(s string) *httptypes.Scheme {
	switch s {
	case "http":
		return &httptypes.Scheme{Type: &httptypes.Scheme_Registered_{Registered: httptypes.Scheme_HTTP}}
	case "https":
		return &httptypes.Scheme{Type: &httptypes.Scheme_Registered_{Registered: httptypes.Scheme_HTTPS}}
	}
	return &httptypes.Scheme{Type: &httptypes.Scheme_Unregistered{Unregistered: s}}
}

func genHeaders(pseudo [][2]string, h http.Header) *httptypes.Headers {
	out := &httptypes.Headers{}
	for _, p := range pseudo {
		out.Headers = append(out.Headers, &httptypes.Headers_Header{Name: p[0], Value: []byte(p[1])})
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			out.Headers = append(out.Headers, &httptypes.Headers_Header{Name: strings.ToLower(k), Value: []byte(v)})
		}
	}
	return out
}

func TestTapWireMatchesTheGeneratedMessages(t *testing.T) {
	start := time.Now()
	long := strings.Repeat("v", 20000) // lengths of three varint bytes
	requests := map[string]*Request{
		"outbound IPv4, registered method, no headers": {
			direction: ptap.TapEvent_OUTBOUND, src: netip.MustParseAddrPort("127.0.0.1:40000"), dst: netip.MustParseAddrPort("10.0.0.7:8080"),
			srcMeta: []label{{"tls", metricstore.NoTLSLoopback}}, dstMeta: []label{{"deployment", "web"}, {"tls", "true"}, {"server_id", "web.shop"}},
			route: "default", start: start, method: "GET", scheme: "http", authority: "web:8080", path: "/",
			headAt: start.Add(3 * time.Millisecond), status: 200,
			sinceRequest: 5 * time.Millisecond, sinceResponse: 2 * time.Millisecond, bytes: 27, grpcStatus: -1, resetCode: -1,
		},
		"inbound IPv6 and IPv4-mapped, unregistered method and scheme, HTTP/2 headers, gRPC status 0": {
			direction: ptap.TapEvent_INBOUND, src: netip.MustParseAddrPort("[fd00::1:2]:5000"), dst: netip.MustParseAddrPort("[::ffff:10.1.2.3]:80"),
			srcMeta: []label{{"tls", "true"}, {"client_id", "a.b"}}, dstMeta: []label{{"srv_kind", "server"}, {"tls", metricstore.NoTLSLoopback}},
			start: start, method: "PROPFIND", scheme: "weird", authority: "api", path: "/x?y=1", reqH2: true,
			reqHeader: http.Header{"User-Agent": {"t"}, "X-Many": {"1", "2"}, "Content-Type": {"application/grpc"}},
			headAt:    start.Add(time.Second + 5), status: 200, respH2: true, respHeader: http.Header{"Grpc-Status": {"0"}},
			sinceRequest: 90 * time.Second, sinceResponse: 0, grpcStatus: 0, resetCode: -1, trailers: http.Header{"Grpc-Message": {"ok"}},
		},
		"IPv6 with a zero half, a reset, large headers, no addresses known": {
			direction: ptap.TapEvent_INBOUND, src: netip.MustParseAddrPort("[::1]:1"), dst: netip.AddrPort{},
			start: start, method: "POST", scheme: "https", path: "/" + long, reqHeader: http.Header{"X-Big": {long, ""}},
			headAt: start.Add(-time.Millisecond), status: 503, respHeader: http.Header{}, sinceRequest: -time.Millisecond - 7,
			grpcStatus: 4, resetCode: 8, trailers: http.Header{"X-Big": {long}},
		},
		"nothing set": {grpcStatus: -1, resetCode: -1},
	}
	for name, tr := range requests {
		for _, headers := range []bool{false, true} {
			for _, kind := range []eventKind{kindRequestInit, kindResponseInit, kindResponseEnd} {
				t.Run(name+"/"+strconv.Itoa(int(kind))+"/headers="+strconv.FormatBool(headers), func(t *testing.T) {
					s := &session{base: 0xfeedbeef, headers: headers}
					it := item{tr: tr, id: 1 << 40, kind: kind}
					got := decodeTapWire(t, s, it)
					want := generatedTapEvent(s, it)
					if diff := cmpTap(want, got); diff != "" {
						t.Fatalf("the hand-written event differs from the generated one:\n%s", diff)
					}
				})
			}
		}
	}
}

func cmpTap(want, got *ptap.TapEvent) string {
	if proto.Equal(want, got) {
		return ""
	}
	return "want: " + want.String() + "\ngot:  " + got.String()
}

func TestTapEncoderReusesItsBufferAcrossEvents(t *testing.T) {
	s := &session{base: 1, headers: true}
	tr := &Request{src: netip.MustParseAddrPort("10.0.0.1:1"), method: "GET", scheme: "http", path: "/", grpcStatus: -1, resetCode: -1,
		reqHeader: http.Header{"A": {"b"}}}
	var enc encoder
	first := enc.encode(s, item{tr: tr, kind: kindRequestInit})
	want := append([]byte(nil), first...)
	allocs := testing.AllocsPerRun(100, func() { enc.encode(s, item{tr: tr, kind: kindRequestInit}) })
	assert.Zero(t, allocs, "an event is written into the encoder's buffer")
	assert.Equal(t, want, enc.encode(s, item{tr: tr, kind: kindRequestInit}))
}

func TestTapDestinationLabelsMatchAsTheyAreReported(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "http://web/", nil)
	srv := &authz.Server{Meta: authz.Meta{Group: "policy.linkerd.io", Kind: "Server", Name: "web-http"}}
	views := map[string]*View{
		"outbound, meshed": {Direction: ptap.TapEvent_OUTBOUND, R: r, DstIdentity: "web.shop",
			DstLabels: map[string]string{"namespace": "shop", "pod": "web-1", "tls": "spoofed", "server_id": "spoofed"}},
		"outbound, not meshed":            {Direction: ptap.TapEvent_OUTBOUND, R: r, DstLabels: map[string]string{"server_id": "x"}},
		"outbound, answered by the proxy": {Direction: ptap.TapEvent_OUTBOUND, R: r},
		"inbound, a route and an authorization": {Direction: ptap.TapEvent_INBOUND, R: r, Peer: authz.Conn{TLS: true, Identity: "a.b"},
			Server: srv, Result: &authz.Result{
				HTTPRoute:     &authz.HTTPRoute{Meta: authz.Meta{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: "books"}},
				Authorization: &authz.Authorization{Meta: authz.Meta{Kind: "AuthorizationPolicy", Name: "allow-ÄÖ"}}}},
		"inbound, built-in policy": {Direction: ptap.TapEvent_INBOUND, R: r,
			Result: &authz.Result{Authorization: &authz.Authorization{Meta: authz.DefaultMeta("all-unauthenticated")}}},
	}
	for name, v := range views {
		t.Run(name, func(t *testing.T) {
			_, dst := v.meta(nil, nil)
			seen := map[string]bool{}
			for _, l := range dst {
				assert.False(t, seen[l.k], "label %s is reported once", l.k)
				seen[l.k] = true
				assert.True(t, v.dstLabelIs(l.k, l.v), "%s=%q matches", l.k, l.v)
				assert.False(t, v.dstLabelIs(l.k, l.v+"x"), "%s=%q+x does not", l.k, l.v)
			}
			for _, k := range []string{"nope", "srv_nope", "route", "authz_", "_kind"} {
				if !seen[k] {
					assert.False(t, v.dstLabelIs(k, ""), "an absent label %q matches nothing", k)
				}
			}
		})
	}
	t.Run("matching allocates nothing", func(t *testing.T) {
		v := views["inbound, a route and an authorization"]
		allocs := testing.AllocsPerRun(100, func() {
			v.dstLabelIs("route_kind", "httproute")
			v.dstLabelIs("srv_name", "web-http")
		})
		assert.Zero(t, allocs)
	})
}

func TestTapBudgetAdmitsItsRateAndRefusesBeyond(t *testing.T) {
	h := NewHub(1, 300) // 100 requests of three events per second
	s := h.newSession(&matcher{}, false, 1000)
	now := int64(time.Hour)
	admitted := 0
	for i := 0; i < 150; i++ {
		if s.allow(3, now) {
			admitted++
		}
	}
	assert.Equal(t, 100, admitted, "a full second's budget at once, no more")
	assert.False(t, s.allow(3, now+int64(9*time.Millisecond)), "a request's three events take 10ms to come back")
	assert.True(t, s.allow(3, now+int64(10*time.Millisecond)))
	assert.False(t, s.allow(3, now+int64(10*time.Millisecond)))
	admitted = 0
	for i := 0; i < 150; i++ {
		if s.allow(3, now+int64(10*time.Second)) {
			admitted++
		}
	}
	assert.Equal(t, 100, admitted, "an idle tap's budget refills to a second's worth, not more")
}
