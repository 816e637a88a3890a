package tap

import (
	"encoding/binary"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
)

// A tap's goroutine writes each event's TapEvent (tap.proto, the field
// numbers below) straight into a buffer it reuses, from the Request,
// instead of building the generated messages and marshalling them: an
// event costs a few hundred bytes of appends and no allocation. The
// tap server frames the bytes as gRPC messages (stream.go).
// TestTapWireMatchesTheGeneratedMessages decodes what this writes with
// the generated types and compares.

// Field numbers of tap.proto, net.proto and http_types.proto.
const (
	fEventSource          = 1
	fEventDestination     = 2
	fEventHTTP            = 3
	fEventDestinationMeta = 4
	fEventSourceMeta      = 5
	fEventProxyDirection  = 6
	fEventRouteMeta       = 7

	fMetaLabels = 1 // EndpointMeta and RouteMeta: map<string, string>
	fMapKey     = 1
	fMapValue   = 2

	fTCPIP   = 1
	fTCPPort = 2
	fIPv4    = 1
	fIPv6    = 2
	fV6First = 1
	fV6Last  = 2

	fHTTPRequestInit  = 1
	fHTTPResponseInit = 2
	fHTTPResponseEnd  = 3

	fStreamBase   = 1
	fStreamStream = 2

	fReqID        = 1
	fReqMethod    = 2
	fReqScheme    = 3
	fReqAuthority = 4
	fReqPath      = 5
	fReqHeaders   = 6

	fRespID      = 1
	fRespSince   = 2
	fRespStatus  = 3
	fRespHeaders = 4

	fEndID           = 1
	fEndSinceRequest = 2
	fEndSinceResp    = 3
	fEndBytes        = 4
	fEndEos          = 5
	fEndTrailers     = 6

	fEosGRPCStatus = 1
	fEosReset      = 2

	fRegistered   = 1 // HttpMethod and Scheme
	fUnregistered = 2

	fHeadersHeader = 1
	fHeaderName    = 1
	fHeaderValue   = 2

	fDurationSeconds = 1
	fDurationNanos   = 2
)

// encoder is a tap goroutine's reused state.
type encoder struct {
	buf   []byte
	names []string
}

// encode writes the event of item it, for session s, into e.buf.
func (e *encoder) encode(s *session, it item) []byte {
	tr := it.tr
	b := e.buf[:0]
	b = appendTCPAddr(b, fEventSource, tr.src)
	b = appendTCPAddr(b, fEventDestination, tr.dst)

	b, ev := openField(b, fEventHTTP)
	var m int
	switch it.kind {
	case kindRequestInit:
		b, m = openField(b, fHTTPRequestInit)
		b = appendStreamID(b, fReqID, s.base, it.id)
		b = appendMethod(b, fReqMethod, tr.method)
		b = appendScheme(b, fReqScheme, tr.scheme)
		b = appendString(b, fReqAuthority, tr.authority)
		b = appendString(b, fReqPath, tr.path)
		if s.headers && tr.reqHeader != nil {
			var pseudo [4][2]string
			n := 0
			if tr.reqH2 {
				pseudo = [4][2]string{{":method", tr.method}, {":scheme", tr.scheme}, {":authority", tr.authority}, {":path", tr.path}}
				n = 4
			}
			b = e.appendHeaders(b, fReqHeaders, pseudo[:n], tr.reqHeader)
		}
		b = closeField(b, m)
	case kindResponseInit:
		b, m = openField(b, fHTTPResponseInit)
		b = appendStreamID(b, fRespID, s.base, it.id)
		b = appendDuration(b, fRespSince, tr.headAt.Sub(tr.start))
		b = appendUint(b, fRespStatus, uint64(uint32(tr.status)))
		if s.headers && tr.respHeader != nil {
			var pseudo [1][2]string
			n := 0
			if tr.respH2 {
				pseudo[0], n = [2]string{":status", strconv.Itoa(tr.status)}, 1
			}
			b = e.appendHeaders(b, fRespHeaders, pseudo[:n], tr.respHeader)
		}
		b = closeField(b, m)
	case kindResponseEnd:
		b, m = openField(b, fHTTPResponseEnd)
		b = appendStreamID(b, fEndID, s.base, it.id)
		b = appendDuration(b, fEndSinceRequest, tr.sinceRequest)
		b = appendDuration(b, fEndSinceResp, tr.sinceResponse)
		b = appendUint(b, fEndBytes, tr.bytes)
		var eos int
		b, eos = openField(b, fEndEos)
		switch {
		case tr.resetCode >= 0:
			b = appendOneofUint(b, fEosReset, uint64(uint32(tr.resetCode)))
		case tr.grpcStatus >= 0:
			b = appendOneofUint(b, fEosGRPCStatus, uint64(uint32(tr.grpcStatus)))
		}
		b = closeField(b, eos)
		if s.headers && tr.trailers != nil {
			b = e.appendHeaders(b, fEndTrailers, nil, tr.trailers)
		}
		b = closeField(b, m)
	}
	b = closeField(b, ev)

	b = appendMeta(b, fEventDestinationMeta, tr.dstMeta)
	b = appendMeta(b, fEventSourceMeta, tr.srcMeta)
	b = appendUint(b, fEventProxyDirection, uint64(tr.direction))
	if tr.route != "" {
		b = appendMeta(b, fEventRouteMeta, []label{{"route", tr.route}})
	}
	e.buf = b
	return b
}

// openField starts a length-delimited field; closeField ends it. The
// length is written in one byte and the content moved when it needs more.
func openField(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b)
}

func closeField(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = slices.Grow(b, k-1)[:len(b)+k-1]
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// appendUint writes a proto3 scalar: nothing for zero.
func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendOneofUint(b, num, v)
}

// appendOneofUint writes a varint even when zero, as a set oneof member.
func appendOneofUint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendTCPAddr(b []byte, num protowire.Number, a netip.AddrPort) []byte {
	if !a.IsValid() {
		return b
	}
	b, m := openField(b, num)
	b, ip := openField(b, fTCPIP)
	if addr := a.Addr().Unmap(); addr.Is4() {
		v4 := addr.As4()
		b = protowire.AppendTag(b, fIPv4, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, binary.BigEndian.Uint32(v4[:]))
	} else {
		v6 := addr.As16()
		var m6 int
		b, m6 = openField(b, fIPv6)
		if first := binary.BigEndian.Uint64(v6[:8]); first != 0 {
			b = protowire.AppendTag(b, fV6First, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, first)
		}
		if last := binary.BigEndian.Uint64(v6[8:]); last != 0 {
			b = protowire.AppendTag(b, fV6Last, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, last)
		}
		b = closeField(b, m6)
	}
	b = closeField(b, ip)
	b = appendUint(b, fTCPPort, uint64(a.Port()))
	return closeField(b, m)
}

func appendStreamID(b []byte, num protowire.Number, base uint32, id uint64) []byte {
	b, m := openField(b, num)
	b = appendUint(b, fStreamBase, uint64(base))
	b = appendUint(b, fStreamStream, id)
	return closeField(b, m)
}

// appendDuration writes a google.protobuf.Duration, as durationpb.New
// splits it (both parts negative for a negative duration).
func appendDuration(b []byte, num protowire.Number, d time.Duration) []byte {
	b, m := openField(b, num)
	b = appendUint(b, fDurationSeconds, uint64(int64(d/time.Second)))
	b = appendUint(b, fDurationNanos, uint64(int64(d%time.Second)))
	return closeField(b, m)
}

// appendMethod writes an HttpMethod: a registered one by its number,
// another by name.
func appendMethod(b []byte, num protowire.Number, method string) []byte {
	b, m := openField(b, num)
	if v, ok := httptypes.HttpMethod_Registered_value[method]; ok {
		b = appendOneofUint(b, fRegistered, uint64(v))
	} else {
		b = protowire.AppendTag(b, fUnregistered, protowire.BytesType)
		b = protowire.AppendString(b, method)
	}
	return closeField(b, m)
}

func appendScheme(b []byte, num protowire.Number, scheme string) []byte {
	b, m := openField(b, num)
	switch scheme {
	case "http":
		b = appendOneofUint(b, fRegistered, uint64(httptypes.Scheme_HTTP))
	case "https":
		b = appendOneofUint(b, fRegistered, uint64(httptypes.Scheme_HTTPS))
	default:
		b = protowire.AppendTag(b, fUnregistered, protowire.BytesType)
		b = protowire.AppendString(b, scheme)
	}
	return closeField(b, m)
}

// appendMeta writes an EndpointMeta or RouteMeta; it is present, perhaps
// empty, on every event.
func appendMeta(b []byte, num protowire.Number, labels []label) []byte {
	b, m := openField(b, num)
	for _, l := range labels {
		var entry int
		b, entry = openField(b, fMetaLabels)
		b = protowire.AppendTag(b, fMapKey, protowire.BytesType)
		b = protowire.AppendString(b, l.k)
		b = protowire.AppendTag(b, fMapValue, protowire.BytesType)
		b = protowire.AppendString(b, l.v)
		b = closeField(b, entry)
	}
	return closeField(b, m)
}

// appendHeaders writes Headers: the pseudo-headers, then h with names
// lower-cased in sorted order (HTTP/2 style), values as sent.
func (e *encoder) appendHeaders(b []byte, num protowire.Number, pseudo [][2]string, h http.Header) []byte {
	b, m := openField(b, num)
	for _, p := range pseudo {
		b = appendHeader(b, p[0], p[1])
	}
	e.names = e.names[:0]
	for k := range h {
		e.names = append(e.names, k)
	}
	slices.Sort(e.names)
	for _, k := range e.names {
		for _, v := range h[k] {
			b = appendHeader(b, k, v)
		}
	}
	clear(e.names) // hold no header names past the event
	return closeField(b, m)
}

// appendHeader writes one Header, its name lower-cased.
func appendHeader(b []byte, name, value string) []byte {
	b, m := openField(b, fHeadersHeader)
	b = protowire.AppendTag(b, fHeaderName, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(name)))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	b = protowire.AppendTag(b, fHeaderValue, protowire.BytesType)
	b = protowire.AppendString(b, value)
	return closeField(b, m)
}
