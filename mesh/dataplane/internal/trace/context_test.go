package trace_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
)

const (
	tid   = "4bf92f3577b34da6a3ce929d0e0e4736"
	sid   = "00f067aa0ba902b7"
	other = "b7ad6b7169203331"
)

// bin is a grpc-trace-bin value: version 0, then the given fields.
func bin(fields ...[]byte) string {
	b := []byte{0}
	for _, f := range fields {
		b = append(b, f...)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func field(id byte, hexValue string) []byte {
	v, err := hex.DecodeString(hexValue)
	if err != nil {
		panic(err)
	}
	return append([]byte{id}, v...)
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestReadAcceptsEachFormatAndRejectsMalformedValues(t *testing.T) {
	cases := []struct {
		name    string
		h       http.Header
		ok      bool
		format  trace.Format
		sampled bool
		short   bool
	}{
		{"w3c sampled", hdr("traceparent", "00-"+tid+"-"+sid+"-01"), true, trace.W3C, true, false},
		{"w3c unsampled", hdr("traceparent", "00-"+tid+"-"+sid+"-00"), true, trace.W3C, false, false},
		{"w3c other flag bits", hdr("traceparent", "00-"+tid+"-"+sid+"-03"), true, trace.W3C, true, false},
		{"w3c future version with more fields", hdr("traceparent", "cc-"+tid+"-"+sid+"-01-what-the-future-holds"), true, trace.W3C, true, false},
		{"w3c future version, exact length", hdr("traceparent", "01-"+tid+"-"+sid+"-01"), true, trace.W3C, true, false},
		{"w3c version 00 with more fields", hdr("traceparent", "00-"+tid+"-"+sid+"-01-extra"), false, 0, false, false},
		{"w3c future version glued to more", hdr("traceparent", "cc-"+tid+"-"+sid+"-01x"), false, 0, false, false},
		{"w3c version ff", hdr("traceparent", "ff-"+tid+"-"+sid+"-01"), false, 0, false, false},
		{"w3c upper-case hex", hdr("traceparent", "00-"+strings.ToUpper(tid)+"-"+sid+"-01"), false, 0, false, false},
		{"w3c zero trace id", hdr("traceparent", "00-"+strings.Repeat("0", 32)+"-"+sid+"-01"), false, 0, false, false},
		{"w3c zero parent id", hdr("traceparent", "00-"+tid+"-"+strings.Repeat("0", 16)+"-01"), false, 0, false, false},
		{"w3c short trace id", hdr("traceparent", "00-"+tid[:30]+"-"+sid+"-01"), false, 0, false, false},
		{"w3c wrong separators", hdr("traceparent", "00_"+tid+"_"+sid+"_01"), false, 0, false, false},
		{"w3c non-hex flags", hdr("traceparent", "00-"+tid+"-"+sid+"-0g"), false, 0, false, false},
		{"w3c sent twice", hdr("traceparent", "00-"+tid+"-"+sid+"-01", "traceparent", "00-"+tid+"-"+other+"-01"), false, 0, false, false},
		{"w3c empty", hdr("traceparent", ""), false, 0, false, false},
		{"w3c huge", hdr("traceparent", "cc-"+tid+"-"+sid+"-01-"+strings.Repeat("x", 1<<16)), true, trace.W3C, true, false},

		{"b3 single, sampled, parent", hdr("b3", tid+"-"+sid+"-1-"+other), true, trace.B3Single, true, false},
		{"b3 single, debug", hdr("b3", tid+"-"+sid+"-d"), true, trace.B3Single, true, false},
		{"b3 single, unsampled", hdr("b3", tid+"-"+sid+"-0"), true, trace.B3Single, false, false},
		{"b3 single, deferred", hdr("b3", tid+"-"+sid), true, trace.B3Single, false, false},
		{"b3 single, 64-bit trace id", hdr("b3", tid[16:]+"-"+sid+"-1"), true, trace.B3Single, true, true},
		{"b3 single, upper-case hex", hdr("b3", strings.ToUpper(tid)+"-"+strings.ToUpper(sid)+"-1"), true, trace.B3Single, true, false},
		{"b3 single, sampling only", hdr("b3", "1"), false, 0, false, false},
		{"b3 single, bad state", hdr("b3", tid+"-"+sid+"-2"), false, 0, false, false},
		{"b3 single, bad parent", hdr("b3", tid+"-"+sid+"-1-xyz"), false, 0, false, false},
		{"b3 single, zero parent", hdr("b3", tid+"-"+sid+"-1-"+strings.Repeat("0", 16)), false, 0, false, false},
		{"b3 single, trailing field", hdr("b3", tid+"-"+sid+"-1-"+other+"-x"), false, 0, false, false},
		{"b3 single, 48-bit trace id", hdr("b3", tid[:12]+"-"+sid+"-1"), false, 0, false, false},
		{"b3 single, zero span id", hdr("b3", tid+"-"+strings.Repeat("0", 16)+"-1"), false, 0, false, false},

		{"b3 multi, sampled", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "1"), true, trace.B3Multi, true, false},
		{"b3 multi, sampled true", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "true"), true, trace.B3Multi, true, false},
		{"b3 multi, unsampled", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "0"), true, trace.B3Multi, false, false},
		{"b3 multi, debug flag", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Flags", "1"), true, trace.B3Multi, true, false},
		{"b3 multi, deferred", hdr("X-B3-TraceId", tid[16:], "X-B3-SpanId", sid), true, trace.B3Multi, false, true},
		{"b3 multi, no span id", hdr("X-B3-TraceId", tid, "X-B3-Sampled", "1"), false, 0, false, false},
		{"b3 multi, bad sampled", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "yes"), false, 0, false, false},
		{"b3 multi, sampled twice", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "1", "X-B3-Sampled", "0"), false, 0, false, false},
		{"b3 multi, span id twice", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-SpanId", other), false, 0, false, false},

		{"grpc-trace-bin sampled", hdr("grpc-trace-bin", bin(field(0, tid), field(1, sid), field(2, "01"))), true, trace.GRPCBin, true, false},
		{"grpc-trace-bin unpadded", hdr("grpc-trace-bin", strings.TrimRight(bin(field(0, tid), field(1, sid), field(2, "01")), "=")), true, trace.GRPCBin, true, false},
		{"grpc-trace-bin without options", hdr("grpc-trace-bin", bin(field(0, tid), field(1, sid))), true, trace.GRPCBin, false, false},
		{"grpc-trace-bin with a later field", hdr("grpc-trace-bin", bin(field(0, tid), field(1, sid), field(2, "01"), field(9, "abcd"))), true, trace.GRPCBin, true, false},
		{"grpc-trace-bin without span id", hdr("grpc-trace-bin", bin(field(0, tid), field(2, "01"))), false, 0, false, false},
		{"grpc-trace-bin short trace id", hdr("grpc-trace-bin", bin(field(0, tid[:30]))), false, 0, false, false},
		{"grpc-trace-bin version 1", hdr("grpc-trace-bin", base64.StdEncoding.EncodeToString(append([]byte{1}, field(0, tid)...))), false, 0, false, false},
		{"grpc-trace-bin zero span id", hdr("grpc-trace-bin", bin(field(0, tid), field(1, strings.Repeat("0", 16)))), false, 0, false, false},
		{"grpc-trace-bin not base64", hdr("grpc-trace-bin", "!!!!"), false, 0, false, false},
		{"grpc-trace-bin too long", hdr("grpc-trace-bin", strings.Repeat("A", 68)), false, 0, false, false},
		{"w3c wins over b3", hdr("traceparent", "00-"+tid+"-"+sid+"-00", "b3", tid+"-"+other+"-1"), true, trace.W3C, false, false},
		{"a bad traceparent falls back to b3", hdr("traceparent", "garbage", "b3", tid+"-"+other+"-1"), true, trace.B3Single, true, false},
		{"nothing", hdr("x-request-id", "abc"), false, 0, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := trace.Read(c.h)
			require.Equal(t, c.ok, ok)
			if !ok {
				assert.Equal(t, trace.Context{}, got)
				return
			}
			assert.Equal(t, c.format, got.Format)
			assert.Equal(t, c.sampled, got.Sampled)
			assert.Equal(t, c.short, got.ShortTraceID)
			assert.True(t, got.TraceID.IsValid())
			assert.True(t, got.SpanID.IsValid())
			if !c.short {
				assert.Equal(t, tid, got.TraceID.String())
			}
		})
	}
}

func TestWriteSendsTheProxySpanAsParentInTheFormatRead(t *testing.T) {
	mine := trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	const myHex = "0102030405060708"
	cases := []struct {
		name string
		in   http.Header
		want map[string]string
	}{
		{"w3c", hdr("traceparent", "00-"+tid+"-"+sid+"-01", "tracestate", "vendor=x"),
			map[string]string{"Traceparent": "00-" + tid + "-" + myHex + "-01", "Tracestate": "vendor=x"}},
		{"w3c future version goes on as 00", hdr("traceparent", "cc-"+tid+"-"+sid+"-ff-more"),
			map[string]string{"Traceparent": "00-" + tid + "-" + myHex + "-03"}},
		{"b3 single sampled", hdr("b3", tid+"-"+sid+"-1-"+other),
			map[string]string{"B3": tid + "-" + myHex + "-1-" + sid}},
		{"b3 single debug, 64-bit", hdr("b3", tid[16:]+"-"+sid+"-d"),
			map[string]string{"B3": tid[16:] + "-" + myHex + "-d-" + sid}},
		{"b3 single deferred", hdr("b3", tid+"-"+sid),
			map[string]string{"B3": tid + "-" + myHex}},
		{"b3 multi", hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "0"),
			map[string]string{"X-B3-Traceid": tid, "X-B3-Spanid": myHex, "X-B3-Parentspanid": sid, "X-B3-Sampled": "0"}},
		{"grpc-trace-bin", hdr("grpc-trace-bin", bin(field(0, tid), field(1, sid), field(2, "01"))),
			map[string]string{"Grpc-Trace-Bin": bin(field(0, tid), field(1, myHex), field(2, "01"))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, ok := trace.Read(c.in)
			require.True(t, ok)
			trace.Write(c.in, ctx, mine)
			for k, v := range c.want {
				assert.Equal(t, []string{v}, c.in[k], k)
			}
			// What was written reads back as the same trace, with this
			// proxy's span as the parent.
			back, ok := trace.Read(c.in)
			require.True(t, ok)
			assert.Equal(t, ctx.TraceID, back.TraceID)
			assert.Equal(t, mine, back.SpanID)
			assert.Equal(t, ctx.Sampled, back.Sampled)
			assert.Equal(t, ctx.Format, back.Format)
		})
	}
}

func TestReadAllocatesNothing(t *testing.T) {
	h := hdr("traceparent", "00-"+tid+"-"+sid+"-01")
	b3 := hdr("X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "1")
	none := hdr("Content-Type", "text/plain")
	allocs := testing.AllocsPerRun(100, func() {
		trace.Read(h)
		trace.Read(b3)
		trace.Read(none)
	})
	assert.Zero(t, allocs)
}

func TestNewSpanIDIsValidAndVaries(t *testing.T) {
	a, b := trace.NewSpanID(), trace.NewSpanID()
	assert.True(t, a.IsValid())
	assert.NotEqual(t, a, b)
}

// FuzzRead feeds hostile values to every header the parser reads: it
// never panics, accepts only valid ids, and what it accepts survives
// being written and read again.
func FuzzRead(f *testing.F) {
	f.Add("00-"+tid+"-"+sid+"-01", "", "", "", "", "")
	f.Add("cc-"+tid+"-"+sid+"-01-x", "", "", "", "", "")
	f.Add("", tid+"-"+sid+"-1-"+other, "", "", "", "")
	f.Add("", tid[16:]+"-"+sid+"-d", "", "", "", "")
	f.Add("", "", tid, sid, "1", "")
	f.Add("ff-"+tid+"-"+sid+"-01", "1", tid[:10], sid, "true", "")
	f.Add("", "", "", "", "", bin(field(0, tid), field(1, sid), field(2, "01")))
	f.Add("", "", "", "", "", "AAAB")
	f.Fuzz(func(t *testing.T, tp, b3, b3t, b3s, b3sampled, grpcBin string) {
		h := http.Header{}
		for k, v := range map[string]string{"Traceparent": tp, "B3": b3, "X-B3-Traceid": b3t, "X-B3-Spanid": b3s, "X-B3-Sampled": b3sampled, "Grpc-Trace-Bin": grpcBin} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		c, ok := trace.Read(h)
		if !ok {
			if c != (trace.Context{}) {
				t.Fatalf("rejected input left a context: %+v", c)
			}
			return
		}
		if !c.TraceID.IsValid() || !c.SpanID.IsValid() || c.Format == 0 {
			t.Fatalf("accepted an invalid context: %+v", c)
		}
		span := trace.NewSpanID()
		out := h.Clone() // Write edits the request's own header
		trace.Write(out, c, span)
		back, ok := trace.Read(out)
		if !ok || back.TraceID != c.TraceID || back.SpanID != span || back.Sampled != c.Sampled || back.Format != c.Format {
			t.Fatalf("written context %v does not read back: %+v -> %+v", out, c, back)
		}
	})
}
