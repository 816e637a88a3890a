package tap

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func mHTTP(h *ptap.ObserveRequest_Match_Http) *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Http_{Http: h}}
}

func mNet(src bool, cidr string) *ptap.ObserveRequest_Match {
	p := netip.MustParsePrefix(cidr)
	tcp := &ptap.ObserveRequest_Match_Tcp{Match: &ptap.ObserveRequest_Match_Tcp_Netmask_{Netmask: &ptap.ObserveRequest_Match_Tcp_Netmask{
		Ip: authz.AddrToProto(p.Addr()), Mask: uint32(p.Bits())}}}
	if src {
		return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Source{Source: tcp}}
	}
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Destination{Destination: tcp}}
}

func mPorts(lo, hi uint32) *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Destination{Destination: &ptap.ObserveRequest_Match_Tcp{
		Match: &ptap.ObserveRequest_Match_Tcp_Ports{Ports: &ptap.ObserveRequest_Match_Tcp_PortRange{Min: lo, Max: hi}}}}}
}

func mSeq(any bool, ms ...*ptap.ObserveRequest_Match) *ptap.ObserveRequest_Match {
	seq := &ptap.ObserveRequest_Match_Seq{Matches: ms}
	if any {
		return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Any{Any: seq}}
	}
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_All{All: seq}}
}

func mNot(m *ptap.ObserveRequest_Match) *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Not{Not: m}}
}

func mDstLabel(k, v string) *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_DestinationLabel{DestinationLabel: &ptap.ObserveRequest_Match_Label{Key: k, Value: v}}}
}

func TestTapMatchesEvaluateLikeLinkerds(t *testing.T) {
	view := func() *View {
		r, _ := http.NewRequest(http.MethodPost, "http://web/api/books", nil)
		return &View{Direction: ptap.TapEvent_OUTBOUND,
			Src: netip.MustParseAddrPort("10.1.2.3:40000"), Dst: netip.MustParseAddrPort("[fd00::7]:8080"), R: r,
			Scheme: "http", Method: "POST", Authority: "web.shop.svc.cluster.local:8080", Path: "/api/books", Route: "books",
			DstLabels: map[string]string{"deployment": "web"}, DstIdentity: "web.shop",
		}
	}
	post := &ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Method{Method: authz.MethodToProto("POST")}}
	get := &ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Method{Method: authz.MethodToProto("GET")}}
	prefix := func(p string) *ptap.ObserveRequest_Match_Http {
		return &ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Path{Path: &ptap.ObserveRequest_Match_Http_StringMatch{
			Match: &ptap.ObserveRequest_Match_Http_StringMatch_Prefix{Prefix: p}}}}
	}
	exactAuthority := &ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Authority{Authority: &ptap.ObserveRequest_Match_Http_StringMatch{
		Match: &ptap.ObserveRequest_Match_Http_StringMatch_Exact{Exact: "web.shop.svc.cluster.local:8080"}}}}
	https := &ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Scheme{Scheme: &httptypes.Scheme{
		Type: &httptypes.Scheme_Registered_{Registered: httptypes.Scheme_HTTPS}}}}
	routeLabel := &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_RouteLabel{RouteLabel: &ptap.ObserveRequest_Match_Label{Key: "route", Value: "books"}}}

	cases := []struct {
		name string
		m    *ptap.ObserveRequest_Match
		want bool
	}{
		{"all of nothing", mSeq(false), true},
		{"any of nothing", mSeq(true), false},
		{"method", mHTTP(post), true},
		{"another method", mHTTP(get), false},
		{"not another method", mNot(mHTTP(get)), true},
		{"path prefix", mHTTP(prefix("/api/")), true},
		{"path prefix that differs", mHTTP(prefix("/admin")), false},
		{"authority exactly", mHTTP(exactAuthority), true},
		{"scheme", mHTTP(https), false},
		{"source network", mNet(true, "10.0.0.0/8"), true},
		{"source elsewhere", mNet(true, "192.168.0.0/16"), false},
		{"destination IPv6 network", mNet(false, "fd00::/8"), true},
		{"an IPv4 network never holds an IPv6 address", mNet(false, "10.0.0.0/8"), false},
		{"destination port range", mPorts(8000, 8100), true},
		{"a single port", mPorts(0, 8080), true},
		{"another port", mPorts(9090, 0), false},
		{"destination label", mDstLabel("deployment", "web"), true},
		{"destination label value", mDstLabel("deployment", "api"), false},
		{"route label", routeLabel, true},
		{"all of several", mSeq(false, mHTTP(post), mPorts(8080, 8080), mDstLabel("tls", "true")), true},
		{"all fails on one", mSeq(false, mHTTP(post), mHTTP(get)), false},
		{"any succeeds on one", mSeq(true, mHTTP(get), mHTTP(prefix("/api"))), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := compileMatch(c.m)
			require.NoError(t, err)
			assert.Equal(t, c.want, m.matches(view()))
		})
	}
}

func TestTapRefusesMatchesLinkerdsProxyRefuses(t *testing.T) {
	deep := mSeq(false)
	for i := 0; i < maxMatchDepth+2; i++ {
		deep = mNot(deep)
	}
	wide := make([]*ptap.ObserveRequest_Match, maxMatchNodes+1)
	for i := range wide {
		wide[i] = mPorts(80, 80)
	}
	for name, m := range map[string]*ptap.ObserveRequest_Match{
		"missing":            nil,
		"empty":              {},
		"reversed ports":     mPorts(9000, 80),
		"port out of range":  mPorts(1, 70000),
		"no port":            mPorts(0, 0),
		"zero mask":          mNet(true, "0.0.0.0/0"),
		"empty label":        mDstLabel("", "x"),
		"empty method":       mHTTP(&ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Method{Method: &httptypes.HttpMethod{}}}),
		"empty string match": mHTTP(&ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Path{Path: &ptap.ObserveRequest_Match_Http_StringMatch{}}}),
		"too deep":           deep,
		"too many":           mSeq(true, wide...),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := compileMatch(m)
			require.ErrorIs(t, err, errInvalidMatch)
		})
	}
	// A mask longer than the address.
	bad := &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Source{Source: &ptap.ObserveRequest_Match_Tcp{
		Match: &ptap.ObserveRequest_Match_Tcp_Netmask_{Netmask: &ptap.ObserveRequest_Match_Tcp_Netmask{
			Ip: authz.AddrToProto(netip.MustParseAddr("10.0.0.0")), Mask: 33}}}}}
	_, err := compileMatch(bad)
	assert.ErrorIs(t, err, errInvalidMatch)
}

func TestTapEventsRenderTheirEndOfStream(t *testing.T) {
	s := &session{base: 7}
	at := time.Now()
	event := func(tr *Request, kind eventKind, id uint64) *ptap.TapEvent {
		tr.direction, tr.src = ptap.TapEvent_INBOUND, netip.MustParseAddrPort("10.0.0.1:5000")
		if tr.start.IsZero() {
			tr.start = at
		}
		return decodeTapWire(t, s, item{tr: tr, id: id, kind: kind})
	}
	grpcEnd := event(&Request{grpcStatus: 0, resetCode: -1, sinceRequest: time.Second, sinceResponse: time.Millisecond, bytes: 12}, kindResponseEnd, 3)
	end := grpcEnd.GetHttp().GetResponseEnd()
	require.NotNil(t, end)
	assert.Equal(t, uint32(7), end.GetId().GetBase())
	assert.Equal(t, uint64(3), end.GetId().GetStream())
	_, isGRPC := end.GetEos().GetEnd().(*ptap.Eos_GrpcStatusCode)
	assert.True(t, isGRPC, "grpc-status 0 is reported")
	assert.Equal(t, uint64(12), end.GetResponseBytes())
	assert.Equal(t, time.Second, end.GetSinceRequestInit().AsDuration())
	assert.Equal(t, uint32(0x0a000001), grpcEnd.GetSource().GetIp().GetIpv4())

	reset := event(&Request{grpcStatus: 0, resetCode: 2}, kindResponseEnd, 0)
	assert.Equal(t, uint32(2), reset.GetHttp().GetResponseEnd().GetEos().GetResetErrorCode(), "a reset wins over a status")

	s.headers = true
	withTrailers := event(&Request{grpcStatus: -1, resetCode: -1, trailers: http.Header{"Grpc-Status": {"0"}}}, kindResponseEnd, 0)
	assert.Equal(t, "grpc-status", withTrailers.GetHttp().GetResponseEnd().GetTrailers().GetHeaders()[0].GetName())

	h2 := event(&Request{headAt: at.Add(time.Millisecond), status: 204, respH2: true, respHeader: http.Header{"X-A": {"1"}}}, kindResponseInit, 0)
	hs := h2.GetHttp().GetResponseInit().GetHeaders().GetHeaders()
	require.Len(t, hs, 2)
	assert.Equal(t, ":status", hs[0].GetName())
	assert.Equal(t, "204", string(hs[0].GetValue()))
	assert.Equal(t, "x-a", hs[1].GetName())
	assert.Equal(t, time.Millisecond, h2.GetHttp().GetResponseInit().GetSinceRequestInit().AsDuration())
}

// BenchmarkTapDataPath measures what the data path does for tap per
// request: the check when no tap is open, matching against an open tap
// that does not take the request (by path, and by a destination label),
// a tap over its budget, and a tap taking the request (its three events
// handed to a reader that drains them and renders each as the stream
// would). Each builds the view as the outbound hook does.
//
//	go test -run XXX -bench TapDataPath ./mesh/dataplane/internal/tap
func BenchmarkTapDataPath(b *testing.B) {
	r, _ := http.NewRequest(http.MethodGet, "http://web/api/books", nil)
	r.Header.Set("User-Agent", "bench")
	dst := netip.MustParseAddrPort("10.0.0.7:8080")
	labels := map[string]string{"namespace": "shop", "deployment": "web", "pod": "web-1"}
	src := netip.MustParseAddrPort("10.0.0.1:40000")
	r.Host = "web:8080"
	// What the outbound path does: the check, the view as its hook
	// (the dataplane package's tapOutbound) builds it, then the
	// response's two steps (no-ops on a request no tap took).
	one := func(h *Hub) {
		if !h.On() {
			return
		}
		v := View{
			Direction: ptap.TapEvent_OUTBOUND, Src: src, Dst: dst, R: r,
			Scheme: "http", Method: r.Method, Authority: r.Host, Path: r.URL.EscapedPath(), Route: "default",
			DstIdentity: "web.shop.serviceaccount.identity.weft.cluster.local", DstLabels: labels,
		}
		tr := h.Start(&v)
		tr.ResponseInit(200, nil, false)
		End(&tr, 27, -1, -1, nil)
	}
	open := func(b *testing.B, h *Hub, m *ptap.ObserveRequest_Match) {
		cm, err := compileMatch(m)
		require.NoError(b, err)
		s := h.newSession(cm, false, 1<<31)
		require.True(b, h.add(s))
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var enc encoder
			for {
				select {
				case it := <-s.events:
					_ = enc.encode(s, it)
					it.done()
				case <-stop:
					return
				}
			}
		}()
		b.Cleanup(func() { close(stop); <-done })
	}
	all := mSeq(false)
	none := mHTTP(&ptap.ObserveRequest_Match_Http{Match: &ptap.ObserveRequest_Match_Http_Path{Path: &ptap.ObserveRequest_Match_Http_StringMatch{
		Match: &ptap.ObserveRequest_Match_Http_StringMatch_Prefix{Prefix: "/never"}}}})
	for _, c := range []struct {
		name  string
		match *ptap.ObserveRequest_Match
		rate  int
	}{
		{"no-tap", nil, 1000},
		{"tap-matching-nothing", none, 1000},
		{"tap-matching-nothing-by-label", mDstLabel("deployment", "db"), 1000},
		{"tap-over-budget", all, 1},
		{"tap-taking-every-request", all, 1 << 30},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := NewHub(16, c.rate)
			if c.match != nil {
				open(b, h, c.match)
			}
			if c.rate == 1 {
				one(h) // spend the budget
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				one(h)
			}
		})
	}
}
