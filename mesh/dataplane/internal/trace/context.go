package trace

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
)

// TraceID identifies a trace (16 bytes; a 64-bit B3 id is its low half).
type TraceID [16]byte

// SpanID identifies a span.
type SpanID [8]byte

// IsValid reports whether the id is not all zeros.
func (t TraceID) IsValid() bool { return t != TraceID{} }

// IsValid reports whether the id is not all zeros.
func (s SpanID) IsValid() bool { return s != SpanID{} }

func (t TraceID) String() string { return hex.EncodeToString(t[:]) }
func (s SpanID) String() string  { return hex.EncodeToString(s[:]) }

// NewSpanID returns a random, valid span id.
func NewSpanID() SpanID {
	var s SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:]) // crypto/rand.Read never fails (Go 1.24+)
	}
	return s
}

// Format is the propagation format a context was read in; Write sends it
// on in the same one.
type Format uint8

// Formats.
const (
	W3C      Format = iota + 1 // traceparent
	B3Single                   // b3
	B3Multi                    // X-B3-TraceId, X-B3-SpanId, ...
	GRPCBin                    // grpc-trace-bin (OpenCensus's binary format)
)

func (f Format) String() string {
	switch f {
	case W3C:
		return "w3c"
	case B3Single:
		return "b3"
	case B3Multi:
		return "b3multi"
	case GRPCBin:
		return "grpc-trace-bin"
	}
	return "none"
}

// Context is the trace context of a request: the trace, the caller's span
// (the parent of the proxy's), and whether the caller sampled it.
type Context struct {
	TraceID TraceID
	SpanID  SpanID
	Sampled bool
	Format  Format

	// Flags is W3C's trace-flags byte as received (bit 0 is Sampled).
	Flags byte
	// Debug is B3's debug flag (which implies Sampled).
	Debug bool
	// ShortTraceID is set for a B3 context whose trace id had 64 bits; it
	// is sent on with 64 bits too.
	ShortTraceID bool
	// Deferred is set for a B3 context that carried no sampling decision
	// (not sampled by this proxy; sent on without a decision).
	Deferred bool
}

// Canonical header keys (http.Header holds keys in this form, for
// HTTP/1 and HTTP/2 requests alike).
const (
	HeaderTraceparent  = "Traceparent"
	HeaderTracestate   = "Tracestate"
	HeaderB3           = "B3"
	HeaderB3TraceID    = "X-B3-Traceid"
	HeaderB3SpanID     = "X-B3-Spanid"
	HeaderB3ParentSpan = "X-B3-Parentspanid"
	HeaderB3Sampled    = "X-B3-Sampled"
	HeaderB3Flags      = "X-B3-Flags"
	HeaderGRPCTraceBin = "Grpc-Trace-Bin"
)

// Read returns the trace context h carries, trying W3C, then gRPC's
// binary header, then B3's single header, then B3's multiple headers; ok
// is false when none parses. Nothing is allocated but for a
// grpc-trace-bin header.
func Read(h http.Header) (c Context, ok bool) {
	if v, one := single(h, HeaderTraceparent); one {
		if c, ok = ParseTraceparent(v); ok {
			return c, true
		}
	}
	if v, one := single(h, HeaderGRPCTraceBin); one {
		if c, ok = ParseGRPCTraceBin(v); ok {
			return c, true
		}
	}
	if v, one := single(h, HeaderB3); one {
		if c, ok = ParseB3(v); ok {
			return c, true
		}
	}
	return parseB3Multi(h)
}

// single returns the one value of key, or false when it has none or
// several (several are ambiguous: which one would the next hop read?).
func single(h http.Header, key string) (string, bool) {
	vs := h[key]
	if len(vs) != 1 {
		return "", false
	}
	return vs[0], true
}

// ParseTraceparent parses a W3C traceparent value. Version 00 is exactly
// 55 characters; a later version may be longer, its known prefix followed
// by '-' (and is sent on as version 00, as the specification asks).
// Version ff, upper-case hex and ids of all zeros are invalid.
func ParseTraceparent(v string) (Context, bool) {
	const n = 2 + 1 + 32 + 1 + 16 + 1 + 2
	if len(v) < n || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return Context{}, false
	}
	var ver [1]byte
	if !decodeLower(ver[:], v[0:2]) || ver[0] == 0xff {
		return Context{}, false
	}
	if (ver[0] == 0 && len(v) != n) || (ver[0] != 0 && len(v) > n && v[n] != '-') {
		return Context{}, false
	}
	c := Context{Format: W3C}
	var flags [1]byte
	if !decodeLower(c.TraceID[:], v[3:35]) || !decodeLower(c.SpanID[:], v[36:52]) || !decodeLower(flags[:], v[53:55]) {
		return Context{}, false
	}
	if !c.TraceID.IsValid() || !c.SpanID.IsValid() {
		return Context{}, false
	}
	c.Flags = flags[0]
	c.Sampled = c.Flags&1 == 1
	return c, true
}

// ParseB3 parses B3's single header: traceid-spanid, then optionally a
// sampling state (0, 1 or d) and a parent span id. The trace id has 16
// or 32 hex digits, the span ids 16. A value that is only a sampling
// state carries no trace to join and is rejected.
func ParseB3(v string) (Context, bool) {
	c := Context{Format: B3Single, Deferred: true}
	tid, rest, _ := cut(v)
	if !parseB3TraceID(&c, tid) {
		return Context{}, false
	}
	sid, rest, more := cut(rest)
	if len(sid) != 16 || !decodeHex(c.SpanID[:], sid) || !c.SpanID.IsValid() {
		return Context{}, false
	}
	if !more {
		return c, true
	}
	state, rest, more := cut(rest)
	switch state {
	case "0":
	case "1":
		c.Sampled = true
	case "d":
		c.Sampled, c.Debug = true, true
	default:
		return Context{}, false
	}
	c.Deferred = false
	if more {
		var parent SpanID
		if len(rest) != 16 || !decodeHex(parent[:], rest) || !parent.IsValid() {
			return Context{}, false
		}
	}
	return c, true
}

// ParseGRPCTraceBin parses grpc-trace-bin, OpenCensus's binary context
// as gRPC carries it: base64 (padded or not) of a version byte 0, then
// fields by id: 0 the trace id (16 bytes), 1 the span id (8), 2 the
// options (1; bit 0 is sampled). A field id it does not know ends the
// parse, as the format allows for later fields; both ids are required.
func ParseGRPCTraceBin(v string) (Context, bool) {
	const maxEncoded = 64 // the three fields take 40 characters
	if len(v) == 0 || len(v) > maxEncoded {
		return Context{}, false
	}
	var raw [48]byte
	enc := base64.StdEncoding
	if v[len(v)-1] != '=' && len(v)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	n, err := enc.Decode(raw[:], []byte(v))
	if err != nil || n < 1 || raw[0] != 0 {
		return Context{}, false
	}
	c := Context{Format: GRPCBin}
	var haveTrace, haveSpan bool
	for b := raw[1:n]; len(b) > 0; {
		switch b[0] {
		case 0:
			if len(b) < 17 || haveTrace {
				return Context{}, false
			}
			copy(c.TraceID[:], b[1:17])
			b, haveTrace = b[17:], true
		case 1:
			if len(b) < 9 || haveSpan {
				return Context{}, false
			}
			copy(c.SpanID[:], b[1:9])
			b, haveSpan = b[9:], true
		case 2:
			if len(b) < 2 {
				return Context{}, false
			}
			c.Flags = b[1]
			b = b[2:]
		default:
			b = nil
		}
	}
	if !haveTrace || !haveSpan || !c.TraceID.IsValid() || !c.SpanID.IsValid() {
		return Context{}, false
	}
	c.Sampled = c.Flags&1 == 1
	return c, true
}

// parseB3Multi reads B3's multiple headers: X-B3-TraceId and X-B3-SpanId
// are required; X-B3-Sampled (1 or true, 0 or false) and X-B3-Flags (1:
// debug) are optional.
func parseB3Multi(h http.Header) (Context, bool) {
	tid, ok1 := single(h, HeaderB3TraceID)
	sid, ok2 := single(h, HeaderB3SpanID)
	if !ok1 || !ok2 {
		return Context{}, false
	}
	c := Context{Format: B3Multi, Deferred: true}
	if !parseB3TraceID(&c, tid) || len(sid) != 16 || !decodeHex(c.SpanID[:], sid) || !c.SpanID.IsValid() {
		return Context{}, false
	}
	if vs, present := h[HeaderB3Sampled]; present {
		if len(vs) != 1 {
			return Context{}, false
		}
		switch vs[0] {
		case "1", "true":
			c.Sampled = true
		case "0", "false":
		default:
			return Context{}, false
		}
		c.Deferred = false
	}
	if vs, present := h[HeaderB3Flags]; present {
		if len(vs) != 1 || vs[0] != "1" && vs[0] != "0" {
			return Context{}, false
		}
		if vs[0] == "1" {
			c.Sampled, c.Debug, c.Deferred = true, true, false
		}
	}
	return c, true
}

func parseB3TraceID(c *Context, s string) bool {
	switch len(s) {
	case 32:
		if !decodeHex(c.TraceID[:], s) {
			return false
		}
	case 16:
		if !decodeHex(c.TraceID[8:], s) {
			return false
		}
		c.ShortTraceID = true
	default:
		return false
	}
	return c.TraceID.IsValid()
}

// cut splits s at its first '-'.
func cut(s string) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// decodeLower decodes lower-case hex of exactly 2*len(dst) digits.
func decodeLower(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := nibble(s[2*i], false)
		lo, ok2 := nibble(s[2*i+1], false)
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// decodeHex is decodeLower accepting upper-case digits too (B3 asks for
// lower case, but its implementations have long read either).
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := nibble(s[2*i], true)
		lo, ok2 := nibble(s[2*i+1], true)
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte, upper bool) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case upper && c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Write sets in h the context to send on: c's trace, with span as the
// parent the next hop sees, in c's format. The headers of that format
// are replaced; the others (and tracestate) are left as they are.
func Write(h http.Header, c Context, span SpanID) {
	switch c.Format {
	case W3C:
		// Version 00 defines bit 0 (sampled) and bit 1 (random trace id).
		h[HeaderTraceparent] = []string{"00-" + c.TraceID.String() + "-" + span.String() + "-" + hex.EncodeToString([]byte{c.Flags & 0x03})}
	case B3Single:
		v := b3TraceID(c) + "-" + span.String()
		if !c.Deferred {
			v += "-" + b3State(c) + "-" + c.SpanID.String()
		}
		h[HeaderB3] = []string{v}
	case B3Multi:
		h[HeaderB3TraceID] = []string{b3TraceID(c)}
		h[HeaderB3SpanID] = []string{span.String()}
		h[HeaderB3ParentSpan] = []string{c.SpanID.String()}
	case GRPCBin:
		var b [29]byte
		b[1] = 0
		copy(b[2:18], c.TraceID[:])
		b[18] = 1
		copy(b[19:27], span[:])
		b[27] = 2
		b[28] = c.Flags & 0x01
		h[HeaderGRPCTraceBin] = []string{base64.StdEncoding.EncodeToString(b[:])}
	}
}

func b3TraceID(c Context) string {
	if c.ShortTraceID {
		return hex.EncodeToString(c.TraceID[8:])
	}
	return c.TraceID.String()
}

func b3State(c Context) string {
	switch {
	case c.Debug:
		return "d"
	case c.Sampled:
		return "1"
	}
	return "0"
}
