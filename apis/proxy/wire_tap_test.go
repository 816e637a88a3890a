package proxy_test

// Tap's messages written byte by byte with the upstream field numbers of
// io.linkerd.proxy.tap (linkerd2-proxy-api v0.20.0 tap.proto). The helpers
// (wire, sub, decodeUpstream, ...) are in wire_test.go.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/tap"
)

// streamID is TapEvent.Http.StreamId: base = 1, stream = 2.
func streamID(n protowire.Number, base, stream uint64) field {
	return sub(n, varint(1, base), varint(2, stream))
}

func TestObserveRequestDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		varint(1, 100), // ObserveRequest.limit = 1
		sub(2, // ObserveRequest.match = 2
			sub(1, // Match.all = 1 (Seq)
				sub(1, // Seq.matches = 1 (repeated Match)
					sub(4, // Match.source = 4 (Tcp)
						sub(1, // Tcp.netmask = 1
							sub(1, fixed32(1, 0x0a010000)), // Netmask.ip = 1 (IPAddress.ipv4 = 1)
							varint(2, 16),                  // Netmask.mask = 2
						))),
				sub(1,
					sub(5, // Match.destination = 5 (Tcp)
						sub(3, // Tcp.ports = 3 (PortRange)
							varint(1, 8000), // PortRange.min = 1
							varint(2, 8080), // PortRange.max = 2
						))),
				sub(1,
					sub(3, // Match.not = 3 (Match)
						sub(6, // Match.http = 6 (Http)
							sub(3, varint(1, 0)), // Http.method = 3 (HttpMethod.registered = 1: GET = 0)
						))),
				sub(1,
					sub(2, // Match.any = 2 (Seq)
						sub(1, sub(6, sub(2, str(1, "web.shop.svc.cluster.local:80")))), // Http.authority = 2, StringMatch.exact = 1
						sub(1, sub(6, sub(4, str(2, "/api/")))),                         // Http.path = 4, StringMatch.prefix = 2
						sub(1, sub(6, sub(1, varint(1, 1)))),                            // Http.scheme = 1 (Scheme.registered = 1: HTTPS = 1)
					)),
				sub(1,
					sub(7, str(1, "deployment"), str(2, "web")), // Match.destination_label = 7 (Label.key = 1, value = 2)
				),
				sub(1,
					sub(8, str(1, "route"), str(2, "checkout")), // Match.route_label = 8 (Label)
				),
				sub(1,
					sub(4, sub(1, // Match.source = 4, Tcp.netmask = 1
						sub(1, sub(2, fixed64(1, 0xfd00_0000_0000_0000), fixed64(2, 1))), // IPAddress.ipv6 = 2 (IPv6.first = 1, last = 2)
						varint(2, 64),
					))),
			)),
		sub(3, // ObserveRequest.extract = 3
			sub(1, // Extract.http = 1
				sub(1), // Extract.Http.headers = 1 (an empty message)
			)),
	}
	var got tap.ObserveRequest
	decodeUpstream(t, w, &got)

	assert.Equal(t, uint32(100), got.GetLimit())
	all := got.GetMatch().GetAll().GetMatches()
	require.Len(t, all, 7)

	src := all[0].GetSource().GetNetmask()
	assert.Equal(t, uint32(0x0a010000), src.GetIp().GetIpv4())
	assert.Equal(t, uint32(16), src.GetMask())

	ports := all[1].GetDestination().GetPorts()
	assert.Equal(t, uint32(8000), ports.GetMin())
	assert.Equal(t, uint32(8080), ports.GetMax())

	notMethod := all[2].GetNot().GetHttp().GetMethod()
	require.NotNil(t, notMethod, "not(http.method) must decode")
	assert.Equal(t, httptypes.HttpMethod_GET, notMethod.GetRegistered())
	_, isRegistered := notMethod.GetType().(*httptypes.HttpMethod_Registered_)
	assert.True(t, isRegistered, "GET is the zero value but is still the set arm")

	anyOf := all[3].GetAny().GetMatches()
	require.Len(t, anyOf, 3)
	assert.Equal(t, "web.shop.svc.cluster.local:80", anyOf[0].GetHttp().GetAuthority().GetExact())
	assert.Equal(t, "/api/", anyOf[1].GetHttp().GetPath().GetPrefix())
	assert.Equal(t, httptypes.Scheme_HTTPS, anyOf[2].GetHttp().GetScheme().GetRegistered())

	assert.Equal(t, "deployment", all[4].GetDestinationLabel().GetKey())
	assert.Equal(t, "web", all[4].GetDestinationLabel().GetValue())
	assert.Equal(t, "route", all[5].GetRouteLabel().GetKey())
	assert.Equal(t, "checkout", all[5].GetRouteLabel().GetValue())

	v6 := all[6].GetSource().GetNetmask()
	assert.Equal(t, uint64(0xfd00_0000_0000_0000), v6.GetIp().GetIpv6().GetFirst())
	assert.Equal(t, uint64(1), v6.GetIp().GetIpv6().GetLast())
	assert.Equal(t, uint32(64), v6.GetMask())

	assert.NotNil(t, got.GetExtract().GetHttp().GetHeaders(), "extract.http.headers must decode as set")
}

func TestTapEventRequestInitDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		tcpAddr4(1, 0x0a000001, 40000), // TapEvent.source = 1
		tcpAddr4(2, 0x0a000002, 8080),  // TapEvent.destination = 2
		sub(3, // TapEvent.http = 3
			sub(1, // Http.request_init = 1
				streamID(1, 7, 42),                        // RequestInit.id = 1
				sub(2, varint(1, 1)),                      // RequestInit.method = 2 (POST = 1)
				sub(3, str(2, "h2c")),                     // RequestInit.scheme = 3 (Scheme.unregistered = 2)
				str(4, "web.shop.svc.cluster.local:8080"), // RequestInit.authority = 4
				str(5, "/checkout?cart=1"),                // RequestInit.path = 5
				sub(6, // RequestInit.headers = 6 (http_types.Headers)
					sub(1, str(1, "content-type"), raw(2, []byte("application/json"))), // Headers.headers = 1 (Header.name = 1, value = 2)
					sub(1, str(1, "x-multi"), raw(2, []byte{0xff, 0x00})),
				),
			)),
		sub(4, entry(1, "deployment", "web"), entry(1, "namespace", "shop")), // TapEvent.destination_meta = 4 (EndpointMeta.labels = 1)
		sub(5, entry(1, "tls", "true")),                                      // TapEvent.source_meta = 5
		varint(6, 2),                                                         // TapEvent.proxy_direction = 6 (OUTBOUND = 2)
		sub(7, entry(1, "route", "checkout")),                                // TapEvent.route_meta = 7 (RouteMeta.labels = 1)
	}
	var got tap.TapEvent
	decodeUpstream(t, w, &got)

	assert.Equal(t, uint32(0x0a000001), got.GetSource().GetIp().GetIpv4())
	assert.Equal(t, uint32(40000), got.GetSource().GetPort())
	assert.Equal(t, uint32(8080), got.GetDestination().GetPort())
	assert.Equal(t, map[string]string{"deployment": "web", "namespace": "shop"}, got.GetDestinationMeta().GetLabels())
	assert.Equal(t, map[string]string{"tls": "true"}, got.GetSourceMeta().GetLabels())
	assert.Equal(t, map[string]string{"route": "checkout"}, got.GetRouteMeta().GetLabels())
	assert.Equal(t, tap.TapEvent_OUTBOUND, got.GetProxyDirection())

	init := got.GetHttp().GetRequestInit()
	require.NotNil(t, init)
	assert.Equal(t, uint32(7), init.GetId().GetBase())
	assert.Equal(t, uint64(42), init.GetId().GetStream())
	assert.Equal(t, httptypes.HttpMethod_POST, init.GetMethod().GetRegistered())
	assert.Equal(t, "h2c", init.GetScheme().GetUnregistered())
	assert.Equal(t, "web.shop.svc.cluster.local:8080", init.GetAuthority())
	assert.Equal(t, "/checkout?cart=1", init.GetPath())
	hs := init.GetHeaders().GetHeaders()
	require.Len(t, hs, 2)
	assert.Equal(t, "content-type", hs[0].GetName())
	assert.Equal(t, []byte{0xff, 0x00}, hs[1].GetValue())
}

func TestTapEventResponseInitDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		varint(6, 1), // TapEvent.proxy_direction = 6 (INBOUND = 1)
		sub(3, // TapEvent.http = 3
			sub(2, // Http.response_init = 2
				streamID(1, 7, 42),        // ResponseInit.id = 1
				duration(2, 0, 1_500_000), // ResponseInit.since_request_init = 2
				varint(3, 503),            // ResponseInit.http_status = 3
				sub(4, sub(1, str(1, "server"), raw(2, []byte("app")))), // ResponseInit.headers = 4
			)),
	}
	var got tap.TapEvent
	decodeUpstream(t, w, &got)

	assert.Equal(t, tap.TapEvent_INBOUND, got.GetProxyDirection())
	rsp := got.GetHttp().GetResponseInit()
	require.NotNil(t, rsp)
	assert.Equal(t, uint64(42), rsp.GetId().GetStream())
	assert.Equal(t, 1500*time.Microsecond, rsp.GetSinceRequestInit().AsDuration())
	assert.Equal(t, uint32(503), rsp.GetHttpStatus())
	assert.Equal(t, "server", rsp.GetHeaders().GetHeaders()[0].GetName())
}

func TestTapEventResponseEndDecodesFromUpstreamBytes(t *testing.T) {
	t.Run("a gRPC end of stream, status zero included", func(t *testing.T) {
		w := wire{
			sub(3, // TapEvent.http = 3
				sub(3, // Http.response_end = 3
					streamID(1, 7, 42),      // ResponseEnd.id = 1
					duration(2, 2, 0),       // ResponseEnd.since_request_init = 2
					duration(3, 0, 250_000), // ResponseEnd.since_response_init = 3
					varint(4, 1<<33),        // ResponseEnd.response_bytes = 4 (uint64)
					sub(5, varint(1, 0)),    // ResponseEnd.eos = 5 (Eos.grpc_status_code = 1: OK)
					sub(6, sub(1, str(1, "grpc-status"), raw(2, []byte("0")))), // ResponseEnd.trailers = 6
				)),
		}
		var got tap.TapEvent
		decodeUpstream(t, w, &got)

		end := got.GetHttp().GetResponseEnd()
		require.NotNil(t, end)
		assert.Equal(t, 2*time.Second, end.GetSinceRequestInit().AsDuration())
		assert.Equal(t, 250*time.Microsecond, end.GetSinceResponseInit().AsDuration())
		assert.Equal(t, uint64(1<<33), end.GetResponseBytes())
		_, isGRPC := end.GetEos().GetEnd().(*tap.Eos_GrpcStatusCode)
		assert.True(t, isGRPC, "grpc_status_code 0 is still the set arm")
		assert.Equal(t, "grpc-status", end.GetTrailers().GetHeaders()[0].GetName())
	})

	t.Run("a stream reset", func(t *testing.T) {
		w := wire{
			sub(3, sub(3, // TapEvent.http = 3, Http.response_end = 3
				streamID(1, 7, 43),
				sub(5, varint(2, 8)), // ResponseEnd.eos = 5 (Eos.reset_error_code = 2: CANCEL)
			)),
		}
		var got tap.TapEvent
		decodeUpstream(t, w, &got)
		assert.Equal(t, uint32(8), got.GetHttp().GetResponseEnd().GetEos().GetResetErrorCode())
	})
}

func TestTapDirectionEnumKeepsUpstreamNumbers(t *testing.T) {
	assert.Equal(t, int32(0), int32(tap.TapEvent_UNKNOWN))
	assert.Equal(t, int32(1), int32(tap.TapEvent_INBOUND))
	assert.Equal(t, int32(2), int32(tap.TapEvent_OUTBOUND))
	assert.Equal(t, "OUTBOUND", tap.TapEvent_OUTBOUND.String())
}
