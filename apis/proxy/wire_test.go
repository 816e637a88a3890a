package proxy_test

// These tests check Weft's generated proxy API against the upstream
// linkerd2-proxy-api v0.20 wire format without trusting the generated code:
// every message below is written byte by byte with protowire, using the
// upstream field numbers as literals (each line names the upstream field it
// stands for). The bytes must decode into the expected Go values with no
// unknown fields left over, and re-encoding the decoded message must give the
// same fields again when walked with protowire.

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/proxy/tap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// field is one field of a hand-written message.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	u     uint64 // varint, fixed32 and fixed64 values
	b     []byte // length-delimited values that are not messages
	m     wire   // nested message, when isMsg
	isMsg bool
}

// wire is a hand-written message: its fields in the order they are written.
type wire []field

func varint(n protowire.Number, v uint64) field {
	return field{num: n, typ: protowire.VarintType, u: v}
}

func fixed32(n protowire.Number, v uint32) field {
	return field{num: n, typ: protowire.Fixed32Type, u: uint64(v)}
}

func fixed64(n protowire.Number, v uint64) field {
	return field{num: n, typ: protowire.Fixed64Type, u: v}
}

func float32f(n protowire.Number, v float32) field {
	return fixed32(n, math.Float32bits(v))
}

func str(n protowire.Number, s string) field {
	return field{num: n, typ: protowire.BytesType, b: []byte(s)}
}

func raw(n protowire.Number, b []byte) field {
	return field{num: n, typ: protowire.BytesType, b: b}
}

func sub(n protowire.Number, fields ...field) field {
	return field{num: n, typ: protowire.BytesType, m: wire(fields), isMsg: true}
}

// entry is one map<string,string> entry: key = 1, value = 2.
func entry(n protowire.Number, k, v string) field {
	return sub(n, str(1, k), str(2, v))
}

// duration is a google.protobuf.Duration: seconds = 1, nanos = 2. Zero
// parts are left out, as every proto3 encoder does.
func duration(n protowire.Number, seconds, nanos uint64) field {
	var fs []field
	if seconds != 0 {
		fs = append(fs, varint(1, seconds))
	}
	if nanos != 0 {
		fs = append(fs, varint(2, nanos))
	}
	return sub(n, fs...)
}

func (w wire) encode() []byte {
	var b []byte
	for _, f := range w {
		b = protowire.AppendTag(b, f.num, f.typ)
		switch f.typ {
		case protowire.VarintType:
			b = protowire.AppendVarint(b, f.u)
		case protowire.Fixed32Type:
			b = protowire.AppendFixed32(b, uint32(f.u))
		case protowire.Fixed64Type:
			b = protowire.AppendFixed64(b, f.u)
		case protowire.BytesType:
			if f.isMsg {
				b = protowire.AppendBytes(b, f.m.encode())
			} else {
				b = protowire.AppendBytes(b, f.b)
			}
		}
	}
	return b
}

// shapeOf returns the union of every nested message written under number n,
// so that walk knows which length-delimited fields to descend into.
func (w wire) shapeOf(n protowire.Number) (wire, bool) {
	var shape wire
	found := false
	for _, f := range w {
		if f.num == n && f.isMsg {
			shape = append(shape, f.m...)
			found = true
		}
	}
	return shape, found
}

// normalized sorts fields by number at every level, keeping the order of
// repeated fields, since encoders may write fields in any order.
func (w wire) normalized() wire {
	out := make(wire, len(w))
	for i, f := range w {
		if f.isMsg {
			f.m = f.m.normalized()
		}
		// An empty byte string is nil on one side and empty on the other.
		if f.b == nil && f.typ == protowire.BytesType && !f.isMsg {
			f.b = []byte{}
		}
		out[i] = f
	}
	slices.SortStableFunc(out, func(a, b field) int { return int(a.num) - int(b.num) })
	return out
}

// walk parses b with protowire alone. shape says which fields hold nested
// messages; anything else length-delimited is kept as raw bytes.
func walk(t *testing.T, b []byte, shape wire) wire {
	t.Helper()
	var out wire
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		require.GreaterOrEqual(t, n, 0, "bad tag: %v", protowire.ParseError(n))
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			require.GreaterOrEqual(t, n, 0, "bad varint in field %d", num)
			out = append(out, varint(num, v))
			b = b[n:]
		case protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			require.GreaterOrEqual(t, n, 0, "bad fixed32 in field %d", num)
			out = append(out, fixed32(num, v))
			b = b[n:]
		case protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			require.GreaterOrEqual(t, n, 0, "bad fixed64 in field %d", num)
			out = append(out, fixed64(num, v))
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			require.GreaterOrEqual(t, n, 0, "bad length-delimited field %d", num)
			if s, ok := shape.shapeOf(num); ok {
				out = append(out, sub(num, walk(t, v, s)...))
			} else {
				out = append(out, raw(num, slices.Clone(v)))
			}
			b = b[n:]
		default:
			t.Fatalf("field %d has unexpected wire type %d", num, typ)
		}
	}
	return out
}

// requireNoUnknownFields fails if any message reachable from m kept bytes it
// could not map to a field: the sign of a wrong field number or type.
func requireNoUnknownFields(t *testing.T, m protoreflect.Message) {
	t.Helper()
	require.Empty(t, m.GetUnknown(), "%s has unknown fields", m.Descriptor().FullName())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				requireNoUnknownFields(t, l.Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				requireNoUnknownFields(t, mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			requireNoUnknownFields(t, v.Message())
		}
		return true
	})
}

// decodeUpstream decodes hand-written upstream bytes into msg, checks that
// nothing was left unknown, and checks that msg encodes back to the same
// fields.
func decodeUpstream(t *testing.T, w wire, msg proto.Message) {
	t.Helper()
	require.NoError(t, proto.Unmarshal(w.encode(), msg))
	requireNoUnknownFields(t, msg.ProtoReflect())

	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	require.NoError(t, err)
	assert.Equal(t, w.normalized(), walk(t, out, w).normalized(),
		"%s re-encodes to different fields", msg.ProtoReflect().Descriptor().FullName())
}

func TestServicesUseUpstreamMethodNames(t *testing.T) {
	type method struct {
		want          string // written out by hand from the upstream schema
		constant      string // the generated *_FullMethodName constant
		input, output string
		serverStream  bool
	}
	methods := []method{
		{"/io.linkerd.proxy.identity.Identity/Certify", identity.Identity_Certify_FullMethodName,
			"io.linkerd.proxy.identity.CertifyRequest", "io.linkerd.proxy.identity.CertifyResponse", false},
		{"/io.linkerd.proxy.destination.Destination/Get", destination.Destination_Get_FullMethodName,
			"io.linkerd.proxy.destination.GetDestination", "io.linkerd.proxy.destination.Update", true},
		{"/io.linkerd.proxy.destination.Destination/GetProfile", destination.Destination_GetProfile_FullMethodName,
			"io.linkerd.proxy.destination.GetDestination", "io.linkerd.proxy.destination.DestinationProfile", true},
		{"/io.linkerd.proxy.inbound.InboundServerPolicies/GetPort", inbound.InboundServerPolicies_GetPort_FullMethodName,
			"io.linkerd.proxy.inbound.PortSpec", "io.linkerd.proxy.inbound.Server", false},
		{"/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort", inbound.InboundServerPolicies_WatchPort_FullMethodName,
			"io.linkerd.proxy.inbound.PortSpec", "io.linkerd.proxy.inbound.Server", true},
		{"/io.linkerd.proxy.outbound.OutboundPolicies/Get", outbound.OutboundPolicies_Get_FullMethodName,
			"io.linkerd.proxy.outbound.TrafficSpec", "io.linkerd.proxy.outbound.OutboundPolicy", false},
		{"/io.linkerd.proxy.outbound.OutboundPolicies/Watch", outbound.OutboundPolicies_Watch_FullMethodName,
			"io.linkerd.proxy.outbound.TrafficSpec", "io.linkerd.proxy.outbound.OutboundPolicy", true},
		{"/io.linkerd.proxy.tap.Tap/Observe", tap.Tap_Observe_FullMethodName,
			"io.linkerd.proxy.tap.ObserveRequest", "io.linkerd.proxy.tap.TapEvent", true},
	}

	// Every method in the four service descriptors must be listed above.
	services := map[string]int{
		"io.linkerd.proxy.identity.Identity":             0,
		"io.linkerd.proxy.destination.Destination":       0,
		"io.linkerd.proxy.inbound.InboundServerPolicies": 0,
		"io.linkerd.proxy.outbound.OutboundPolicies":     0,
		"io.linkerd.proxy.tap.Tap":                       0,
	}
	for _, m := range methods {
		assert.Equal(t, m.want, m.constant)

		svc, name := splitMethod(t, m.want)
		services[svc]++
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		require.NoError(t, err, "service %s is not registered", svc)
		sd, ok := d.(protoreflect.ServiceDescriptor)
		require.True(t, ok, "%s is not a service", svc)
		md := sd.Methods().ByName(protoreflect.Name(name))
		require.NotNil(t, md, "service %s has no method %s", svc, name)
		assert.Equal(t, m.input, string(md.Input().FullName()), "input of %s", m.want)
		assert.Equal(t, m.output, string(md.Output().FullName()), "output of %s", m.want)
		assert.Equal(t, m.serverStream, md.IsStreamingServer(), "server streaming of %s", m.want)
		assert.False(t, md.IsStreamingClient(), "client streaming of %s", m.want)
	}
	for svc, n := range services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		require.NoError(t, err)
		assert.Equal(t, n, d.(protoreflect.ServiceDescriptor).Methods().Len(), "methods of %s", svc)
	}

	// The grpc.ServiceDesc values that Register functions use.
	assert.Equal(t, "io.linkerd.proxy.identity.Identity", identity.Identity_ServiceDesc.ServiceName)
	assert.Equal(t, "io.linkerd.proxy.destination.Destination", destination.Destination_ServiceDesc.ServiceName)
	assert.Equal(t, "io.linkerd.proxy.inbound.InboundServerPolicies", inbound.InboundServerPolicies_ServiceDesc.ServiceName)
	assert.Equal(t, "io.linkerd.proxy.outbound.OutboundPolicies", outbound.OutboundPolicies_ServiceDesc.ServiceName)
	assert.Equal(t, "io.linkerd.proxy.tap.Tap", tap.Tap_ServiceDesc.ServiceName)

	assert.Equal(t, []string{"Certify"}, unaryNames(identity.Identity_ServiceDesc.Methods))
	assert.Empty(t, identity.Identity_ServiceDesc.Streams)
	assert.Empty(t, destination.Destination_ServiceDesc.Methods)
	assert.Equal(t, []string{"Get", "GetProfile"}, streamNames(destination.Destination_ServiceDesc.Streams))
	assert.Equal(t, []string{"GetPort"}, unaryNames(inbound.InboundServerPolicies_ServiceDesc.Methods))
	assert.Equal(t, []string{"WatchPort"}, streamNames(inbound.InboundServerPolicies_ServiceDesc.Streams))
	assert.Equal(t, []string{"Get"}, unaryNames(outbound.OutboundPolicies_ServiceDesc.Methods))
	assert.Equal(t, []string{"Watch"}, streamNames(outbound.OutboundPolicies_ServiceDesc.Streams))
	assert.Empty(t, tap.Tap_ServiceDesc.Methods)
	assert.Equal(t, []string{"Observe"}, streamNames(tap.Tap_ServiceDesc.Streams))
}

func TestEveryProtoFileDeclaresItsUpstreamPackage(t *testing.T) {
	want := map[string]string{
		"identity.proto":     "io.linkerd.proxy.identity",
		"destination.proto":  "io.linkerd.proxy.destination",
		"inbound.proto":      "io.linkerd.proxy.inbound",
		"outbound.proto":     "io.linkerd.proxy.outbound",
		"meta.proto":         "io.linkerd.proxy.meta",
		"net.proto":          "io.linkerd.proxy.net",
		"http_types.proto":   "io.linkerd.proxy.http_types",
		"http_route.proto":   "io.linkerd.proxy.http_route",
		"grpc_route.proto":   "io.linkerd.proxy.grpc_route",
		"opaque_route.proto": "io.linkerd.proxy.opaque_route",
		"tls_route.proto":    "io.linkerd.proxy.tls_route",
		"tap.proto":          "io.linkerd.proxy.tap",
	}
	for path, pkg := range want {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		require.NoError(t, err, "%s is not registered", path)
		assert.Equal(t, pkg, string(fd.Package()), "package of %s", path)
		assert.Equal(t, protoreflect.Proto3, fd.Syntax(), "syntax of %s", path)
	}

	// No other file may claim a proxy API package.
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if pkg := string(fd.Package()); len(pkg) > len("io.linkerd.proxy.") && pkg[:len("io.linkerd.proxy.")] == "io.linkerd.proxy." {
			assert.Equal(t, want[fd.Path()], pkg, "unexpected file %s in package %s", fd.Path(), pkg)
		}
		return true
	})
}

func TestCertifyRequestDecodesFromUpstreamBytes(t *testing.T) {
	csr := []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	w := wire{
		str(1, "web.shop.serviceaccount.identity.weft.cluster.local"), // CertifyRequest.identity = 1
		raw(2, []byte("token-bytes")),                                 // CertifyRequest.token = 2
		raw(3, csr),                                                   // CertifyRequest.certificate_signing_request = 3
	}
	var got identity.CertifyRequest
	decodeUpstream(t, w, &got)

	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", got.GetIdentity())
	assert.Equal(t, []byte("token-bytes"), got.GetToken())
	assert.Equal(t, csr, got.GetCertificateSigningRequest())
}

func TestCertifyResponseDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		raw(1, []byte("leaf-pem")),   // CertifyResponse.leaf_certificate = 1
		raw(2, []byte("issuer-pem")), // CertifyResponse.intermediate_certificates = 2 (repeated)
		raw(2, []byte("middle-pem")),
		sub(3, varint(1, 1_700_000_000), varint(2, 5)), // CertifyResponse.valid_until = 3 (Timestamp seconds = 1, nanos = 2)
	}
	var got identity.CertifyResponse
	decodeUpstream(t, w, &got)

	assert.Equal(t, []byte("leaf-pem"), got.GetLeafCertificate())
	assert.Equal(t, [][]byte{[]byte("issuer-pem"), []byte("middle-pem")}, got.GetIntermediateCertificates())
	assert.Equal(t, int64(1_700_000_000), got.GetValidUntil().GetSeconds())
	assert.Equal(t, int32(5), got.GetValidUntil().GetNanos())
}

func TestGetDestinationDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		str(1, "k8s"), // GetDestination.scheme = 1
		str(2, "web.shop.svc.cluster.local:8080"), // GetDestination.path = 2
		str(3, `{"ns":"shop","nodeName":"n1"}`),   // GetDestination.context_token = 3
	}
	var got destination.GetDestination
	decodeUpstream(t, w, &got)

	assert.Equal(t, "k8s", got.GetScheme())
	assert.Equal(t, "web.shop.svc.cluster.local:8080", got.GetPath())
	assert.Equal(t, `{"ns":"shop","nodeName":"n1"}`, got.GetContextToken())
}

// tcpAddr4 is a net.TcpAddress for an IPv4 address:
// TcpAddress.ip = 1 (IPAddress.ipv4 = 1, fixed32), TcpAddress.port = 2.
func tcpAddr4(n protowire.Number, ip uint32, port uint64) field {
	return sub(n, sub(1, fixed32(1, ip)), varint(2, port))
}

func TestUpdateAddDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		sub(1, // Update.add = 1 (WeightedAddrSet)
			sub(1, // WeightedAddrSet.addrs = 1 (WeightedAddr)
				tcpAddr4(1, 0x0a010203, 8080), // WeightedAddr.addr = 1: 10.1.2.3:8080
				varint(3, 10000),              // WeightedAddr.weight = 3
				entry(4, "pod", "web-1"),      // WeightedAddr.metric_labels = 4
				entry(4, "zone", "a"),
				sub(5, // WeightedAddr.tls_identity = 5 (TlsIdentity)
					sub(1, str(1, "web.shop.serviceaccount.identity.weft.cluster.local")), // TlsIdentity.dns_like_identity = 1, DnsLikeIdentity.name = 1
					sub(4, str(1, "web.shop.serviceaccount.identity.weft.cluster.local")), // TlsIdentity.server_name = 4
				),
				sub(6, // WeightedAddr.protocol_hint = 6 (ProtocolHint)
					sub(1),                  // ProtocolHint.h2 = 1 (H2, empty)
					sub(2, varint(1, 4143)), // ProtocolHint.opaque_transport = 2, OpaqueTransport.inbound_port = 1
				),
				sub(7, str(1, "web.shop.svc.cluster.local:8080")), // WeightedAddr.authority_override = 7, AuthorityOverride.authority_override = 1
				sub(8, // WeightedAddr.http2 = 8 (Http2ClientParams)
					sub(1, varint(1, 1<<20), varint(2, 1<<16), varint(3, 1)),    // flow_control = 1: initial_connection_window_size = 1, initial_stream_window_size = 2, adaptive_flow_control = 3
					sub(2, duration(1, 10, 0), duration(2, 3, 0), varint(3, 1)), // keep_alive = 2: interval = 1, timeout = 2, while_idle = 3
					sub(3, varint(1, 50), varint(2, 16384), varint(3, 4096)),    // internals = 3: max_concurrent_reset_streams = 1, max_frame_size = 2, max_send_buf_size = 3
				),
				sub(9, sub(2, str(2, "Pod"), str(3, "web-1"), str(4, "shop"))), // WeightedAddr.resource_ref = 9: Metadata.resource = 2 (kind = 2, name = 3, namespace = 4)
			),
			entry(2, "namespace", "shop"), // WeightedAddrSet.metric_labels = 2
			entry(2, "service", "web"),
		),
	}
	var got destination.Update
	decodeUpstream(t, w, &got)

	add := got.GetAdd()
	require.NotNil(t, add, "the add arm must be set")
	assert.Equal(t, map[string]string{"namespace": "shop", "service": "web"}, add.GetMetricLabels())
	require.Len(t, add.GetAddrs(), 1)
	wa := add.GetAddrs()[0]
	assert.Equal(t, uint32(0x0a010203), wa.GetAddr().GetIp().GetIpv4())
	assert.Equal(t, uint32(8080), wa.GetAddr().GetPort())
	assert.Equal(t, uint32(10000), wa.GetWeight())
	assert.Equal(t, map[string]string{"pod": "web-1", "zone": "a"}, wa.GetMetricLabels())
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", wa.GetTlsIdentity().GetDnsLikeIdentity().GetName())
	assert.Nil(t, wa.GetTlsIdentity().GetUriLikeIdentity())
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", wa.GetTlsIdentity().GetServerName().GetName())
	assert.NotNil(t, wa.GetProtocolHint().GetH2(), "the h2 hint must be set")
	assert.Nil(t, wa.GetProtocolHint().GetOpaque())
	assert.Equal(t, uint32(4143), wa.GetProtocolHint().GetOpaqueTransport().GetInboundPort())
	assert.Equal(t, "web.shop.svc.cluster.local:8080", wa.GetAuthorityOverride().GetAuthorityOverride())
	assert.Equal(t, uint32(1<<20), wa.GetHttp2().GetFlowControl().GetInitialConnectionWindowSize())
	assert.Equal(t, uint32(1<<16), wa.GetHttp2().GetFlowControl().GetInitialStreamWindowSize())
	assert.True(t, wa.GetHttp2().GetFlowControl().GetAdaptiveFlowControl())
	assert.Equal(t, int64(10), wa.GetHttp2().GetKeepAlive().GetInterval().GetSeconds())
	assert.Equal(t, int64(3), wa.GetHttp2().GetKeepAlive().GetTimeout().GetSeconds())
	assert.True(t, wa.GetHttp2().GetKeepAlive().GetWhileIdle())
	assert.Equal(t, uint32(50), wa.GetHttp2().GetInternals().GetMaxConcurrentResetStreams())
	assert.Equal(t, uint32(16384), wa.GetHttp2().GetInternals().GetMaxFrameSize())
	assert.Equal(t, uint32(4096), wa.GetHttp2().GetInternals().GetMaxSendBufSize())
	assert.Equal(t, "Pod", wa.GetResourceRef().GetResource().GetKind())
	assert.Equal(t, "web-1", wa.GetResourceRef().GetResource().GetName())
	assert.Equal(t, "shop", wa.GetResourceRef().GetResource().GetNamespace())
}

func TestProtocolHintOpaqueDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		sub(3),                  // ProtocolHint.opaque = 3 (Opaque, empty)
		sub(2, varint(1, 4143)), // ProtocolHint.opaque_transport = 2, OpaqueTransport.inbound_port = 1
	}
	var got destination.ProtocolHint
	decodeUpstream(t, w, &got)

	assert.NotNil(t, got.GetOpaque(), "the opaque hint must be set")
	assert.Nil(t, got.GetH2())
	assert.Equal(t, uint32(4143), got.GetOpaqueTransport().GetInboundPort())
}

func TestTlsIdentityURIDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		sub(3, str(1, "spiffe://cluster.local/ns/shop/sa/web")), // TlsIdentity.uri_like_identity = 3, UriLikeIdentity.uri = 1
		sub(4, str(1, "web.shop.svc")),                          // TlsIdentity.server_name = 4
	}
	var got destination.TlsIdentity
	decodeUpstream(t, w, &got)

	assert.Equal(t, "spiffe://cluster.local/ns/shop/sa/web", got.GetUriLikeIdentity().GetUri())
	assert.Nil(t, got.GetDnsLikeIdentity())
	assert.Equal(t, "web.shop.svc", got.GetServerName().GetName())
}

func TestUpdateRemoveDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		sub(2, // Update.remove = 2 (AddrSet)
			tcpAddr4(1, 0x0a000001, 80), // AddrSet.addrs = 1: 10.0.0.1:80
			sub(1, // AddrSet.addrs = 1: [2001:db8::1]:443
				sub(1, sub(2, fixed64(1, 0x20010db800000000), fixed64(2, 1))), // TcpAddress.ip = 1, IPAddress.ipv6 = 2, IPv6.first = 1, IPv6.last = 2
				varint(2, 443), // TcpAddress.port = 2
			),
		),
	}
	var got destination.Update
	decodeUpstream(t, w, &got)

	rm := got.GetRemove()
	require.NotNil(t, rm, "the remove arm must be set")
	require.Len(t, rm.GetAddrs(), 2)
	assert.Equal(t, uint32(0x0a000001), rm.GetAddrs()[0].GetIp().GetIpv4())
	assert.Equal(t, uint32(80), rm.GetAddrs()[0].GetPort())
	assert.Equal(t, uint64(0x20010db800000000), rm.GetAddrs()[1].GetIp().GetIpv6().GetFirst())
	assert.Equal(t, uint64(1), rm.GetAddrs()[1].GetIp().GetIpv6().GetLast())
	assert.Equal(t, uint32(443), rm.GetAddrs()[1].GetPort())
}

func TestUpdateNoEndpointsDecodesFromUpstreamBytes(t *testing.T) {
	t.Run("exists", func(t *testing.T) {
		w := wire{sub(3, varint(1, 1))} // Update.no_endpoints = 3, NoEndpoints.exists = 1
		var got destination.Update
		decodeUpstream(t, w, &got)
		require.NotNil(t, got.GetNoEndpoints(), "the no_endpoints arm must be set")
		assert.True(t, got.GetNoEndpoints().GetExists())
	})
	t.Run("does not exist", func(t *testing.T) {
		w := wire{sub(3)} // Update.no_endpoints = 3 with exists left at false
		var got destination.Update
		decodeUpstream(t, w, &got)
		require.NotNil(t, got.GetNoEndpoints(), "an empty no_endpoints must still select the arm")
		assert.False(t, got.GetNoEndpoints().GetExists())
		assert.Nil(t, got.GetAdd())
		assert.Nil(t, got.GetRemove())
	})
}

func TestDestinationProfileDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		sub(1, // DestinationProfile.routes = 1 (Route)
			sub(1, // Route.condition = 1 (RequestMatch)
				sub(1, // RequestMatch.all = 1 (Seq)
					sub(1, sub(4, str(1, "^/api/.*$"))), // Seq.matches = 1: RequestMatch.path = 4, PathMatch.regex = 1
					sub(1, sub(5, varint(1, 1))),        // Seq.matches = 1: RequestMatch.method = 5, HttpMethod.registered = 1 (POST = 1)
				),
			),
			sub(2, // Route.response_classes = 2 (ResponseClass)
				sub(1, sub(4, varint(1, 500), varint(2, 599))), // ResponseClass.condition = 1: ResponseMatch.status = 4, HttpStatusRange.min = 1, max = 2
				varint(2, 1), // ResponseClass.is_failure = 2
			),
			entry(3, "route", "POST /api"), // Route.metrics_labels = 3
			varint(4, 1),                   // Route.is_retryable = 4
			duration(5, 2, 500_000_000),    // Route.timeout = 5
		),
		sub(2, // DestinationProfile.retry_budget = 2 (RetryBudget)
			float32f(1, 0.2),   // RetryBudget.retry_ratio = 1 (float)
			varint(2, 10),      // RetryBudget.min_retries_per_second = 2
			duration(3, 10, 0), // RetryBudget.ttl = 3
		),
		sub(3, str(1, "web-v2.shop.svc.cluster.local:8080"), varint(2, 900), // DestinationProfile.dst_overrides = 3: WeightedDst.authority = 1, weight = 2
			sub(3, sub(2, str(2, "Service"), str(3, "web-v2")))), // WeightedDst.backend_ref = 3
		varint(4, 1),                                                                  // DestinationProfile.opaque_protocol = 4
		str(5, "web.shop.svc.cluster.local"),                                          // DestinationProfile.fully_qualified_name = 5
		sub(6, tcpAddr4(1, 0x0a010203, 8080), varint(3, 1)),                           // DestinationProfile.endpoint = 6 (WeightedAddr addr = 1, weight = 3)
		sub(7, sub(2, str(2, "Service"), str(3, "web"), str(4, "shop"))),              // DestinationProfile.parent_ref = 7
		sub(8, sub(2, str(1, "linkerd.io"), str(2, "ServiceProfile"), str(3, "web"))), // DestinationProfile.profile_ref = 8
	}
	var got destination.DestinationProfile
	decodeUpstream(t, w, &got)

	assert.Equal(t, "web.shop.svc.cluster.local", got.GetFullyQualifiedName())
	assert.True(t, got.GetOpaqueProtocol())
	require.Len(t, got.GetRoutes(), 1)
	r := got.GetRoutes()[0]
	all := r.GetCondition().GetAll().GetMatches()
	require.Len(t, all, 2)
	assert.Equal(t, "^/api/.*$", all[0].GetPath().GetRegex())
	assert.Equal(t, httptypes.HttpMethod_POST, all[1].GetMethod().GetRegistered())
	require.Len(t, r.GetResponseClasses(), 1)
	assert.Equal(t, uint32(500), r.GetResponseClasses()[0].GetCondition().GetStatus().GetMin())
	assert.Equal(t, uint32(599), r.GetResponseClasses()[0].GetCondition().GetStatus().GetMax())
	assert.True(t, r.GetResponseClasses()[0].GetIsFailure())
	assert.Equal(t, map[string]string{"route": "POST /api"}, r.GetMetricsLabels())
	assert.True(t, r.GetIsRetryable())
	assert.Equal(t, int64(2), r.GetTimeout().GetSeconds())
	assert.Equal(t, int32(500_000_000), r.GetTimeout().GetNanos())
	assert.InDelta(t, 0.2, got.GetRetryBudget().GetRetryRatio(), 1e-6)
	assert.Equal(t, uint32(10), got.GetRetryBudget().GetMinRetriesPerSecond())
	assert.Equal(t, int64(10), got.GetRetryBudget().GetTtl().GetSeconds())
	require.Len(t, got.GetDstOverrides(), 1)
	assert.Equal(t, "web-v2.shop.svc.cluster.local:8080", got.GetDstOverrides()[0].GetAuthority())
	assert.Equal(t, uint32(900), got.GetDstOverrides()[0].GetWeight())
	assert.Equal(t, "web-v2", got.GetDstOverrides()[0].GetBackendRef().GetResource().GetName())
	assert.Equal(t, uint32(8080), got.GetEndpoint().GetAddr().GetPort())
	assert.Equal(t, "web", got.GetParentRef().GetResource().GetName())
	assert.Equal(t, "ServiceProfile", got.GetProfileRef().GetResource().GetKind())
	assert.Equal(t, "linkerd.io", got.GetProfileRef().GetResource().GetGroup())
}

func TestInboundServerDecodesFromUpstreamBytes(t *testing.T) {
	// An HTTP route with one rule, used by the detect arm.
	httpRoute := sub(3, // ProxyProtocol.Detect.http_routes = 3 (inbound HttpRoute)
		sub(1, sub(2, str(1, "policy.linkerd.io"), str(2, "HTTPRoute"), str(3, "api"))), // HttpRoute.metadata = 1
		sub(2, str(1, "api.shop")), // HttpRoute.hosts = 2: HostMatch.exact = 1
		sub(4, // HttpRoute.rules = 4 (Rule)
			sub(1, // Rule.matches = 1 (HttpRouteMatch)
				sub(1, str(2, "/api")),                          // HttpRouteMatch.path = 1: PathMatch.prefix = 2
				sub(2, str(1, "x-tenant"), raw(2, []byte("a"))), // HttpRouteMatch.headers = 2: HeaderMatch.name = 1, exact = 2 (bytes)
				sub(4, varint(1, 0x0)),                          // HttpRouteMatch.method = 4: HttpMethod.registered = 1 (GET = 0)
			),
			sub(2, sub(2, sub(2, sub(1, str(1, "x-weft"), raw(2, []byte("1")))))), // Rule.filters = 2: Filter.request_header_modifier = 2, set = 2, Headers.headers = 1 (name = 1, value = 2)
		),
	)
	w := wire{
		sub(1, // Server.protocol = 1 (ProxyProtocol)
			sub(1, // ProxyProtocol.detect = 1 (Detect)
				duration(1, 10, 0), // Detect.timeout = 1
				httpRoute,
				sub(4, // Detect.http_local_rate_limit = 4 (HttpLocalRateLimit)
					sub(1, str(1, "default-limit")), // HttpLocalRateLimit.metadata = 1: Metadata.default = 1
					sub(2, varint(1, 100)),          // HttpLocalRateLimit.total = 2: Limit.requestsPerSecond = 1
					sub(3, varint(1, 10)),           // HttpLocalRateLimit.identity = 3
					sub(4, sub(1, varint(1, 50)), sub(2, sub(1, str(1, "batch.shop.serviceaccount.identity.weft.cluster.local")))), // overrides = 4: Override.limit = 1, clients = 2, ClientIdentities.identities = 1, Identity.name = 1
				),
			),
		),
		sub(2, fixed32(1, 0x0a010203)), // Server.server_ips = 2: IPAddress.ipv4 = 1
		sub(3, // Server.authorizations = 3 (Authz)
			sub(1, // Authz.networks = 1 (Network)
				sub(1, sub(1, fixed32(1, 0x0a000000)), varint(2, 8)),  // Network.net = 1: IPNetwork.ip = 1, prefix_len = 2
				sub(2, sub(1, fixed32(1, 0x0a0a0000)), varint(2, 16)), // Network.except = 2
			),
			sub(2, // Authz.authentication = 2 (Authn)
				sub(2, // Authn.meshTLS = 2 (PermitMeshTLS)
					sub(2, // PermitMeshTLS.identities = 2 (PermitClientIdentities)
						sub(1, str(1, "web.shop.serviceaccount.identity.weft.cluster.local")), // PermitClientIdentities.identities = 1: Identity.name = 1
						sub(2, str(1, "cluster"), str(1, "local")),                            // PermitClientIdentities.suffixes = 2: IdentitySuffix.parts = 1
					),
				),
			),
			entry(3, "name", "web-authz"), // Authz.labels = 3
			sub(4, sub(2, str(1, "policy.linkerd.io"), str(2, "AuthorizationPolicy"), str(3, "web-authz"), str(4, "shop"))), // Authz.metadata = 4
		),
		sub(3, // a second authorization: any client, no TLS needed
			sub(1, sub(1, sub(1, fixed32(1, 0x0a000000)), varint(2, 8))),
			sub(2, sub(1)), // Authz.authentication = 2: Authn.unauthenticated = 1
		),
		entry(4, "kind", "server"), // Server.labels = 4
		entry(4, "name", "web-http"),
	}
	var got inbound.Server
	decodeUpstream(t, w, &got)

	det := got.GetProtocol().GetDetect()
	require.NotNil(t, det, "the detect arm must be set")
	assert.Equal(t, int64(10), det.GetTimeout().GetSeconds())
	require.Len(t, det.GetHttpRoutes(), 1)
	hr := det.GetHttpRoutes()[0]
	assert.Equal(t, "HTTPRoute", hr.GetMetadata().GetResource().GetKind())
	assert.Equal(t, "api.shop", hr.GetHosts()[0].GetExact())
	require.Len(t, hr.GetRules(), 1)
	m := hr.GetRules()[0].GetMatches()[0]
	assert.Equal(t, "/api", m.GetPath().GetPrefix())
	assert.Equal(t, "x-tenant", m.GetHeaders()[0].GetName())
	assert.Equal(t, []byte("a"), m.GetHeaders()[0].GetExact())
	assert.Equal(t, httptypes.HttpMethod_GET, m.GetMethod().GetRegistered())
	set := hr.GetRules()[0].GetFilters()[0].GetRequestHeaderModifier().GetSet().GetHeaders()
	require.Len(t, set, 1)
	assert.Equal(t, "x-weft", set[0].GetName())
	rl := det.GetHttpLocalRateLimit()
	assert.Equal(t, "default-limit", rl.GetMetadata().GetDefault())
	assert.Equal(t, uint32(100), rl.GetTotal().GetRequestsPerSecond())
	assert.Equal(t, uint32(10), rl.GetIdentity().GetRequestsPerSecond())
	require.Len(t, rl.GetOverrides(), 1)
	assert.Equal(t, uint32(50), rl.GetOverrides()[0].GetLimit().GetRequestsPerSecond())
	assert.Equal(t, "batch.shop.serviceaccount.identity.weft.cluster.local", rl.GetOverrides()[0].GetClients().GetIdentities()[0].GetName())

	require.Len(t, got.GetServerIps(), 1)
	assert.Equal(t, uint32(0x0a010203), got.GetServerIps()[0].GetIpv4())
	require.Len(t, got.GetAuthorizations(), 2)
	az := got.GetAuthorizations()[0]
	assert.Equal(t, uint32(0x0a000000), az.GetNetworks()[0].GetNet().GetIp().GetIpv4())
	assert.Equal(t, uint32(8), az.GetNetworks()[0].GetNet().GetPrefixLen())
	assert.Equal(t, uint32(16), az.GetNetworks()[0].GetExcept()[0].GetPrefixLen())
	ids := az.GetAuthentication().GetMeshTLS().GetIdentities()
	require.NotNil(t, ids, "the identities arm of meshTLS must be set")
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", ids.GetIdentities()[0].GetName())
	assert.Equal(t, []string{"cluster", "local"}, ids.GetSuffixes()[0].GetParts())
	assert.Equal(t, map[string]string{"name": "web-authz"}, az.GetLabels())
	assert.Equal(t, "AuthorizationPolicy", az.GetMetadata().GetResource().GetKind())
	assert.NotNil(t, got.GetAuthorizations()[1].GetAuthentication().GetUnauthenticated())
	assert.Equal(t, map[string]string{"kind": "server", "name": "web-http"}, got.GetLabels())
}

func TestInboundHTTP2AndGRPCArmsDecodeFromUpstreamBytes(t *testing.T) {
	t.Run("http2", func(t *testing.T) {
		w := wire{sub(5, // ProxyProtocol.http2 = 5
			sub(2, sub(4, sub(1, sub(1, str(1, "/"))))), // Http2.routes = 2: HttpRoute.rules = 4, Rule.matches = 1, path = 1, PathMatch.exact = 1
			sub(3, sub(2, varint(1, 7))),                // Http2.local_rate_limit = 3: total = 2, requestsPerSecond = 1
		)}
		var got inbound.ProxyProtocol
		decodeUpstream(t, w, &got)
		require.NotNil(t, got.GetHttp2())
		assert.Equal(t, "/", got.GetHttp2().GetRoutes()[0].GetRules()[0].GetMatches()[0].GetPath().GetExact())
		assert.Equal(t, uint32(7), got.GetHttp2().GetLocalRateLimit().GetTotal().GetRequestsPerSecond())
	})
	t.Run("grpc", func(t *testing.T) {
		w := wire{sub(6, // ProxyProtocol.grpc = 6
			sub(2, // Grpc.routes = 2 (inbound GrpcRoute)
				sub(4, // GrpcRoute.rules = 4
					sub(1, sub(1, str(1, "shop.Cart"), str(2, "Add"))),                                // Rule.matches = 1: GrpcRouteMatch.rpc = 1 (service = 1, method = 2)
					sub(2, sub(1, varint(1, 14), str(2, "down"), sub(3, varint(1, 1), varint(2, 2)))), // Rule.filters = 2: failure_injector = 1 (code = 1, message = 2, ratio = 3)
				),
			),
		)}
		var got inbound.ProxyProtocol
		decodeUpstream(t, w, &got)
		rule := got.GetGrpc().GetRoutes()[0].GetRules()[0]
		assert.Equal(t, "shop.Cart", rule.GetMatches()[0].GetRpc().GetService())
		assert.Equal(t, "Add", rule.GetMatches()[0].GetRpc().GetMethod())
		fi := rule.GetFilters()[0].GetFailureInjector()
		assert.Equal(t, uint32(14), fi.GetCode())
		assert.Equal(t, "down", fi.GetMessage())
		assert.Equal(t, uint32(2), fi.GetRatio().GetDenominator())
	})
}

func TestOutboundPolicyDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		sub(1, // OutboundPolicy.protocol = 1 (ProxyProtocol)
			sub(1, // ProxyProtocol.detect = 1 (Detect)
				duration(1, 10, 0), // Detect.timeout = 1
				sub(2, // Detect.opaque = 2 (ProxyProtocol.Opaque)
					sub(1, // Opaque.routes = 1 (OpaqueRoute)
						sub(1, str(1, "default")), // OpaqueRoute.metadata = 1: Metadata.default = 1
						sub(3, // OpaqueRoute.rules = 3 (Rule)
							sub(1, sub(2, sub(1, backend(1)))),     // Rule.backends = 1: Distribution.first_available = 2, FirstAvailable.backends = 1, RouteBackend.backend = 1
							sub(2, sub(1, str(1, "no such port"))), // Rule.filters = 2: Filter.invalid = 1, Invalid.message = 1
						),
					),
				),
				sub(3, // Detect.http1 = 3 (Http1)
					sub(1, // Http1.routes = 1 (outbound HttpRoute)
						sub(1, sub(2, str(1, "gateway.networking.k8s.io"), str(2, "HTTPRoute"), str(3, "web-route"))), // HttpRoute.metadata = 1
						sub(2, sub(2, str(1, "com"), str(1, "example"))),                                              // HttpRoute.hosts = 2: HostMatch.suffix = 2, Suffix.reverse_labels = 1
						sub(3, // HttpRoute.rules = 3 (Rule)
							sub(1, sub(1, str(2, "/api")), sub(3, str(1, "v"), str(2, "2"))), // Rule.matches = 1: path = 1 (PathMatch.prefix = 2), query_params = 3 (name = 1, exact = 2)
							sub(2, sub(4, // Rule.filters = 2: Filter.response_header_modifier = 4
								sub(1, sub(1, str(1, "x-served-by"), raw(2, []byte("weft")))), // ResponseHeaderModifier.add = 1: Headers.headers = 1 (name = 1, value = 2)
								str(3, "server"), // ResponseHeaderModifier.remove = 3
							)),
							sub(3, // Rule.backends = 3 (Distribution)
								sub(3, // Distribution.random_available = 3
									sub(1, // RandomAvailable.backends = 1 (WeightedRouteBackend)
										sub(1, backend(1)), // WeightedRouteBackend.backend = 1, RouteBackend.backend = 1
										varint(2, 90),      // WeightedRouteBackend.weight = 2
									),
								),
							),
							duration(4, 5, 0), // Rule.requestTimeout = 4 (deprecated upstream, still on the wire)
							sub(5, duration(1, 5, 0), duration(2, 6, 0), duration(3, 7, 0)), // Rule.timeouts = 5: Timeouts.response = 1, request = 2, idle = 3
							sub(6, // Rule.retry = 6 (Retry)
								varint(1, 3),     // Retry.max_retries = 1
								varint(2, 65536), // Retry.max_request_bytes = 2
								sub(3, sub(1, varint(1, 500), varint(2, 599))), // Retry.conditions = 3: status_ranges = 1 (start = 1, end = 2)
								duration(4, 1, 0), // Retry.timeout = 4
								sub(5, duration(1, 0, 25_000_000), duration(2, 1, 0), float32f(3, 0.5)), // Retry.backoff = 5: min_backoff = 1, max_backoff = 2, jitter_ratio = 3
							),
							varint(7, 1), // Rule.allow_l5d_request_headers = 7
						),
					),
					sub(2, sub(1, varint(1, 7), sub(2, duration(1, 1, 0), duration(2, 60, 0), float32f(3, 0.5)))), // Http1.failure_accrual = 2: consecutive_failures = 1 (max_failures = 1, backoff = 2)
				),
				sub(4, sub(1, sub(1, str(1, "default")))), // Detect.http2 = 4: Http2.routes = 1, HttpRoute.metadata = 1
			),
		),
		sub(2, sub(2, str(2, "Service"), str(3, "web"), str(4, "shop"), varint(6, 8080))), // OutboundPolicy.metadata = 2
	}
	var got outbound.OutboundPolicy
	decodeUpstream(t, w, &got)

	assert.Equal(t, uint32(8080), got.GetMetadata().GetResource().GetPort())
	det := got.GetProtocol().GetDetect()
	require.NotNil(t, det, "the detect arm must be set")
	assert.Equal(t, int64(10), det.GetTimeout().GetSeconds())

	require.Len(t, det.GetOpaque().GetRoutes(), 1)
	opq := det.GetOpaque().GetRoutes()[0]
	assert.Equal(t, "default", opq.GetMetadata().GetDefault())
	fa := opq.GetRules()[0].GetBackends().GetFirstAvailable()
	require.NotNil(t, fa, "the first_available arm must be set")
	checkBackend(t, fa.GetBackends()[0].GetBackend())
	assert.Equal(t, "no such port", opq.GetRules()[0].GetFilters()[0].GetInvalid().GetMessage())

	require.Len(t, det.GetHttp1().GetRoutes(), 1)
	hr := det.GetHttp1().GetRoutes()[0]
	assert.Equal(t, "web-route", hr.GetMetadata().GetResource().GetName())
	assert.Equal(t, []string{"com", "example"}, hr.GetHosts()[0].GetSuffix().GetReverseLabels())
	rule := hr.GetRules()[0]
	assert.Equal(t, "/api", rule.GetMatches()[0].GetPath().GetPrefix())
	assert.Equal(t, "v", rule.GetMatches()[0].GetQueryParams()[0].GetName())
	assert.Equal(t, "2", rule.GetMatches()[0].GetQueryParams()[0].GetExact())
	rhm := rule.GetFilters()[0].GetResponseHeaderModifier()
	assert.Equal(t, []byte("weft"), rhm.GetAdd().GetHeaders()[0].GetValue())
	assert.Equal(t, []string{"server"}, rhm.GetRemove())
	ra := rule.GetBackends().GetRandomAvailable()
	require.NotNil(t, ra, "the random_available arm must be set")
	assert.Equal(t, uint32(90), ra.GetBackends()[0].GetWeight())
	checkBackend(t, ra.GetBackends()[0].GetBackend().GetBackend())
	//lint:ignore SA1019 the deprecated field must still decode: older control planes send it
	assert.Equal(t, int64(5), rule.GetRequestTimeout().GetSeconds())
	assert.Equal(t, int64(5), rule.GetTimeouts().GetResponse().GetSeconds())
	assert.Equal(t, int64(6), rule.GetTimeouts().GetRequest().GetSeconds())
	assert.Equal(t, int64(7), rule.GetTimeouts().GetIdle().GetSeconds())
	assert.Equal(t, uint32(3), rule.GetRetry().GetMaxRetries())
	assert.Equal(t, uint32(65536), rule.GetRetry().GetMaxRequestBytes())
	assert.Equal(t, uint32(500), rule.GetRetry().GetConditions().GetStatusRanges()[0].GetStart())
	assert.Equal(t, uint32(599), rule.GetRetry().GetConditions().GetStatusRanges()[0].GetEnd())
	assert.Equal(t, int64(1), rule.GetRetry().GetTimeout().GetSeconds())
	assert.Equal(t, int32(25_000_000), rule.GetRetry().GetBackoff().GetMinBackoff().GetNanos())
	assert.InDelta(t, 0.5, rule.GetRetry().GetBackoff().GetJitterRatio(), 1e-6)
	assert.True(t, rule.GetAllowL5DRequestHeaders())
	cf := det.GetHttp1().GetFailureAccrual().GetConsecutiveFailures()
	assert.Equal(t, uint32(7), cf.GetMaxFailures())
	assert.Equal(t, int64(60), cf.GetBackoff().GetMaxBackoff().GetSeconds())
	assert.Equal(t, "default", det.GetHttp2().GetRoutes()[0].GetMetadata().GetDefault())
}

// backend is an outbound Backend that balances over a Destination lookup.
func backend(n protowire.Number) field {
	return sub(n,
		sub(1, sub(2, str(2, "Service"), str(3, "web"), str(4, "shop"), varint(6, 8080))), // Backend.metadata = 1: Metadata.resource = 2 (Resource.port = 6)
		sub(3, // Backend.balancer = 3 (BalanceP2c)
			sub(1, sub(1, str(1, "web.shop.svc.cluster.local:8080"))), // BalanceP2c.discovery = 1: EndpointDiscovery.dst = 1, DestinationGet.path = 1
			sub(2, duration(1, 0, 30_000_000), duration(2, 10, 0)),    // BalanceP2c.peak_ewma = 2: PeakEwma.default_rtt = 1, decay = 2
		),
		sub(4, varint(1, 100), duration(2, 3, 0)), // Backend.queue = 4: Queue.capacity = 1, failfast_timeout = 2
	)
}

func checkBackend(t *testing.T, b *outbound.Backend) {
	t.Helper()
	require.NotNil(t, b)
	assert.Equal(t, "web", b.GetMetadata().GetResource().GetName())
	p2c := b.GetBalancer()
	require.NotNil(t, p2c, "the balancer arm must be set")
	assert.Equal(t, "web.shop.svc.cluster.local:8080", p2c.GetDiscovery().GetDst().GetPath())
	assert.Equal(t, int32(30_000_000), p2c.GetPeakEwma().GetDefaultRtt().GetNanos())
	assert.Equal(t, int64(10), p2c.GetPeakEwma().GetDecay().GetSeconds())
	assert.Equal(t, uint32(100), b.GetQueue().GetCapacity())
	assert.Equal(t, int64(3), b.GetQueue().GetFailfastTimeout().GetSeconds())
}

func TestOutboundGRPCAndTLSArmsDecodeFromUpstreamBytes(t *testing.T) {
	t.Run("grpc", func(t *testing.T) {
		w := wire{sub(5, // ProxyProtocol.grpc = 5 (Grpc)
			sub(1, // Grpc.routes = 1 (outbound GrpcRoute)
				sub(3, // GrpcRoute.rules = 3 (Rule)
					sub(1, sub(1, str(1, "shop.Cart"))), // Rule.matches = 1: GrpcRouteMatch.rpc = 1, GrpcRpcMatch.service = 1
					sub(3, sub(1)),                      // Rule.backends = 3: Distribution.empty = 1
					sub(6, // Rule.retry = 6 (Retry)
						varint(1, 2), // Retry.max_retries = 1
						sub(3, // Retry.conditions = 3: each field number is the gRPC code it stands for
							varint(1, 1),  // Conditions.cancelled = 1
							varint(4, 1),  // Conditions.deadine_exceeded = 4
							varint(8, 1),  // Conditions.resource_exhausted = 8
							varint(13, 1), // Conditions.internal = 13
							varint(14, 1), // Conditions.unavailable = 14
						),
					),
				),
			),
			sub(2, sub(1, varint(1, 5))), // Grpc.failure_accrual = 2: consecutive_failures = 1, max_failures = 1
		)}
		var got outbound.ProxyProtocol
		decodeUpstream(t, w, &got)
		rule := got.GetGrpc().GetRoutes()[0].GetRules()[0]
		assert.Equal(t, "shop.Cart", rule.GetMatches()[0].GetRpc().GetService())
		assert.NotNil(t, rule.GetBackends().GetEmpty(), "the empty arm must be set")
		c := rule.GetRetry().GetConditions()
		assert.True(t, c.GetCancelled())
		assert.True(t, c.GetDeadineExceeded())
		assert.True(t, c.GetResourceExhausted())
		assert.True(t, c.GetInternal())
		assert.True(t, c.GetUnavailable())
		assert.Equal(t, uint32(5), got.GetGrpc().GetFailureAccrual().GetConsecutiveFailures().GetMaxFailures())
	})
	t.Run("tls", func(t *testing.T) {
		w := wire{sub(6, // ProxyProtocol.tls = 6 (Tls)
			sub(1, // Tls.routes = 1 (TlsRoute)
				sub(2, str(1, "api.example.com")),                // TlsRoute.snis = 2: SniMatch.exact = 1
				sub(2, sub(2, str(1, "com"), str(1, "example"))), // TlsRoute.snis = 2: SniMatch.suffix = 2, Suffix.reverse_labels = 1
				sub(3, // TlsRoute.rules = 3 (Rule)
					sub(1, sub(2, sub(1, // Rule.backends = 1: first_available = 2, FirstAvailable.backends = 1 (RouteBackend)
						sub(1, sub(2, tcpAddr4(1, 0x0a010203, 443), varint(3, 1))), // RouteBackend.backend = 1: Backend.forward = 2 (WeightedAddr addr = 1, weight = 3)
						sub(3, sub(2)), // RouteBackend.filters = 3: Filter.forbidden = 2
					))),
					sub(2, sub(2)), // Rule.filters = 2: Filter.forbidden = 2
				),
			),
		)}
		var got outbound.ProxyProtocol
		decodeUpstream(t, w, &got)
		tr := got.GetTls().GetRoutes()[0]
		assert.Equal(t, "api.example.com", tr.GetSnis()[0].GetExact())
		assert.Equal(t, []string{"com", "example"}, tr.GetSnis()[1].GetSuffix().GetReverseLabels())
		rb := tr.GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0]
		assert.Equal(t, uint32(0x0a010203), rb.GetBackend().GetForward().GetAddr().GetIp().GetIpv4())
		assert.NotNil(t, rb.GetFilters()[0].GetForbidden(), "the forbidden arm must be set")
		assert.NotNil(t, tr.GetRules()[0].GetFilters()[0].GetForbidden(), "the forbidden arm must be set")
	})
}

func TestV0_20BalancerAndAccrualFieldsDecodeFromUpstreamBytes(t *testing.T) {
	t.Run("penalty peak EWMA", func(t *testing.T) {
		w := wire{ // Backend.BalanceP2c
			sub(3, // BalanceP2c.penalty_peak_ewma = 3 (oneof load, v0.20; v0.19 used 3 for ejection)
				duration(1, 0, 30_000_000), // PenaltyPeakEwma.default_rtt = 1
				duration(2, 10, 0),         // PenaltyPeakEwma.decay = 2
				duration(3, 5, 0),          // PenaltyPeakEwma.penalty = 3
				duration(4, 300, 0),        // PenaltyPeakEwma.max_retry_after = 4
				duration(5, 10, 0),         // PenaltyPeakEwma.penalty_decay = 5
			),
		}
		var got outbound.Backend_BalanceP2C
		decodeUpstream(t, w, &got)
		p := got.GetPenaltyPeakEwma()
		require.NotNil(t, p, "the penalty_peak_ewma arm must be set")
		assert.Nil(t, got.GetPeakEwma())
		assert.Equal(t, int32(30_000_000), p.GetDefaultRtt().GetNanos())
		assert.Equal(t, int64(5), p.GetPenalty().GetSeconds())
		assert.Equal(t, int64(300), p.GetMaxRetryAfter().GetSeconds())
		assert.Equal(t, int64(10), p.GetPenaltyDecay().GetSeconds())
	})
	t.Run("unified accrual with ejection", func(t *testing.T) {
		w := wire{
			sub(2, // FailureAccrual.unified = 2 (oneof kind, v0.20)
				fixed64(1, math.Float64bits(0.8)), // Unified.success_rate_threshold = 1 (double)
				duration(2, 10, 0),                // Unified.decay = 2
				varint(3, 5),                      // Unified.min_requests = 3
				varint(4, 7),                      // Unified.max_consecutive_failures = 4
				sub(5, // Unified.backoff = 5 (ExponentialBackoff)
					duration(1, 1, 0),  // min_backoff = 1
					duration(2, 60, 0), // max_backoff = 2
					float32f(3, 0.5),   // jitter_ratio = 3
					varint(4, 1),       // respect_retry_after_hint = 4 (v0.20)
				),
			),
			sub(3, varint(1, 2)), // FailureAccrual.ejection = 3: EjectionConfig.min_ready_endpoints = 1
		}
		var got outbound.FailureAccrual
		decodeUpstream(t, w, &got)
		u := got.GetUnified()
		require.NotNil(t, u, "the unified arm must be set")
		assert.Equal(t, 0.8, u.GetSuccessRateThreshold())
		assert.Equal(t, int64(10), u.GetDecay().GetSeconds())
		assert.Equal(t, uint32(5), u.GetMinRequests())
		assert.Equal(t, uint32(7), u.GetMaxConsecutiveFailures())
		assert.True(t, u.GetBackoff().GetRespectRetryAfterHint())
		assert.Equal(t, float32(0.5), u.GetBackoff().GetJitterRatio())
		assert.Equal(t, uint32(2), got.GetEjection().GetMinReadyEndpoints())
	})
}

func TestTrafficSpecDecodesFromUpstreamBytes(t *testing.T) {
	t.Run("addr", func(t *testing.T) {
		w := wire{
			str(1, `{"ns":"shop","pod":"web-1"}`), // TrafficSpec.source_workload = 1
			tcpAddr4(2, 0x0a600001, 80),           // TrafficSpec.addr = 2
		}
		var got outbound.TrafficSpec
		decodeUpstream(t, w, &got)
		assert.Equal(t, `{"ns":"shop","pod":"web-1"}`, got.GetSourceWorkload())
		assert.Equal(t, uint32(0x0a600001), got.GetAddr().GetIp().GetIpv4())
		assert.Empty(t, got.GetAuthority())
	})
	t.Run("authority", func(t *testing.T) {
		w := wire{
			str(1, "shop:web-1"),                    // TrafficSpec.source_workload = 1
			str(3, "web.shop.svc.cluster.local:80"), // TrafficSpec.authority = 3
		}
		var got outbound.TrafficSpec
		decodeUpstream(t, w, &got)
		assert.Equal(t, "web.shop.svc.cluster.local:80", got.GetAuthority())
		assert.Nil(t, got.GetAddr())
	})
}

func TestPortSpecDecodesFromUpstreamBytes(t *testing.T) {
	w := wire{
		str(1, "shop:web-1"), // PortSpec.workload = 1
		varint(2, 8080),      // PortSpec.port = 2
	}
	var got inbound.PortSpec
	decodeUpstream(t, w, &got)
	assert.Equal(t, "shop:web-1", got.GetWorkload())
	assert.Equal(t, uint32(8080), got.GetPort())
}

func splitMethod(t *testing.T, full string) (service, method string) {
	t.Helper()
	require.True(t, len(full) > 1 && full[0] == '/', "method name %q must start with /", full)
	i := len(full) - 1
	for i > 0 && full[i] != '/' {
		i--
	}
	require.Positive(t, i, "method name %q has no service part", full)
	return full[1:i], full[i+1:]
}

func unaryNames(ms []grpc.MethodDesc) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.MethodName)
	}
	return names
}

func streamNames(ss []grpc.StreamDesc) []string {
	var names []string
	for _, s := range ss {
		names = append(names, s.StreamName)
	}
	return names
}
