package h2hdr

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// block is one header block to put on the wire: its fields, or raw
// HPACK bytes, split into frames of at most frag bytes.
type block struct {
	fields []hpack.HeaderField
	raw    []byte
	frag   int
	end    bool
}

// wire encodes blocks on streams 1, 3, 5..., each followed by a PING (so
// that what comes after a block is read too).
func wire(t testing.TB, blocks []block) []byte {
	t.Helper()
	var out, hb bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&hb)
	for i, b := range blocks {
		hb.Reset()
		for _, f := range b.fields {
			require.NoError(t, enc.WriteField(f))
		}
		p := append(hb.Bytes(), b.raw...)
		n := b.frag
		if n <= 0 || n > len(p) {
			n = len(p)
		}
		id := uint32(2*i + 1)
		require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p[:n], EndStream: b.end, EndHeaders: n == len(p)}))
		for p = p[n:]; len(p) > 0; {
			m := min(len(p), b.frag)
			require.NoError(t, fr.WriteContinuation(id, m == len(p), p[:m]))
			p = p[m:]
		}
		require.NoError(t, fr.WritePing(false, [8]byte{byte(i)}))
	}
	return out.Bytes()
}

// outcome is what a reader made of one frame, comparable across the
// two readers.
type outcome struct {
	kind      string // frame type, or "error"
	stream    uint32
	fields    []hpack.HeaderField
	truncated bool
	ended     bool
	errKind   string // stream or connection error, and its code
}

func errKind(err error) string {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("stream %d %v", se.StreamID, se.Code)
	case errors.As(err, &ce):
		return "conn " + http2.ErrCode(ce).String()
	}
	return err.Error()
}

// readAll reads frames until EOF or a connection error, with x/net's
// meta-header reading (ours == false) or with a Reader.
func readAll(t *testing.T, p []byte, maxList uint32, ours bool) []outcome {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(p))
	var r *Reader
	if ours {
		r = NewReader(fr, 4096, maxList)
	} else {
		fr.MaxHeaderListSize = maxList
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	}
	var out []outcome
	for len(out) < 100 {
		var f http2.Frame
		var err error
		if ours {
			f, err = r.ReadFrame()
		} else {
			f, err = fr.ReadFrame()
		}
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			o := outcome{kind: "error", errKind: errKind(err)}
			if f != nil {
				o.stream = f.Header().StreamID
			}
			out = append(out, o)
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return out
			}
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			out = append(out, outcome{kind: "headers", stream: f.StreamID, fields: append([]hpack.HeaderField{}, f.Fields...), truncated: f.Truncated, ended: f.StreamEnded()})
		case *http2.HeadersFrame:
			b := &r.Block
			require.Same(t, f, b.HeadersFrame, "the block is the frame's")
			out = append(out, outcome{kind: "headers", stream: f.StreamID, fields: append([]hpack.HeaderField{}, b.Fields...), truncated: b.Truncated, ended: b.StreamEnded()})
		default:
			out = append(out, outcome{kind: f.Header().Type.String(), stream: f.Header().StreamID})
		}
	}
	return out
}

func hf(name, value string) hpack.HeaderField { return hpack.HeaderField{Name: name, Value: value} }

var request = []hpack.HeaderField{
	hf(":method", "POST"), hf(":scheme", "https"), hf(":path", "/grpc.testing.TestService/UnaryCall"),
	hf(":authority", "svc.ns:8080"), hf("content-type", "application/grpc"), hf("te", "trailers"),
}

// readerCase is a byte stream of header blocks to decode, and the header
// list cap to decode it with.
type readerCase struct {
	name    string
	blocks  []block
	maxList uint32
}

// readerCases are the differential cases: the unit test runs them, and
// they seed the fuzz target.
func readerCases() []readerCase {
	long := string(bytes.Repeat([]byte("v"), 300))
	raw := string(bytes.Repeat([]byte("~"), 300)) // no shorter in Huffman: sent as is
	return []readerCase{
		{"requests and responses, table reused", []block{{fields: request}, {fields: request, end: true}, {fields: []hpack.HeaderField{hf(":status", "200"), hf("content-type", "application/grpc")}}, {fields: []hpack.HeaderField{hf("grpc-status", "0"), hf("grpc-message", "")}, end: true}}, 0},
		{"continuation frames", []block{{fields: append(request, hf("x-long", long), hf("x-long2", long)), frag: 50}, {fields: request, frag: 7}}, 0},
		{"repeated regular fields", []block{{fields: append(request, hf("cookie", "a=1"), hf("cookie", "b=2"), hf("x", "1"), hf("x", "2"))}}, 0},
		{"upper-case name", []block{{fields: append(request, hf("X-Bad", "1"))}, {fields: request}}, 0},
		{"name not a token", []block{{fields: append(request, hf("x bad", "1"))}, {fields: request}}, 0},
		{"empty name", []block{{fields: append(request, hf("", "1"))}, {fields: request}}, 0},
		{"control byte in a value", []block{{fields: append(request, hf("x", "a\x00b"))}, {fields: request}}, 0},
		{"newline in a value", []block{{fields: append(request, hf("x", "a\nb"))}}, 0},
		{"pseudo after regular", []block{{fields: append(request, hf(":method", "GET"))}, {fields: request}}, 0},
		{"repeated pseudo", []block{{fields: append([]hpack.HeaderField{hf(":path", "/a")}, request...)}, {fields: request}}, 0},
		{"unknown pseudo", []block{{fields: []hpack.HeaderField{hf(":bogus", "1"), hf(":method", "GET")}}, {fields: request}}, 0},
		{"request and response pseudos", []block{{fields: []hpack.HeaderField{hf(":status", "200"), hf(":method", "GET")}}, {fields: request}}, 0},
		{"invalid field then continuation", []block{{fields: append([]hpack.HeaderField{hf("X-Bad", "1")}, append(request, hf("x-long", long))...), frag: 20}}, 0},
		{"list over the cap", []block{{fields: append(request, hf("x-long", long), hf("x-after", "1"))}, {fields: request}}, 400},
		{"trailer field counted by what it declares", []block{{fields: append(request, hf("trailer", "a,b,c,d,e,f,g,h,i,j"))}, {fields: request}}, 400},
		{"fragment far over the cap", []block{{fields: append(request, hf("x-long", long), hf("x-long2", long), hf("x-long3", long)), frag: 2000}}, 300},
		{"fragment over twice the cap", []block{{fields: append(request, hf("x-1", raw), hf("x-2", raw), hf("x-3", raw), hf("x-4", raw), hf("x-5", raw)), frag: 4000}}, 300},
		{"fragment under twice the cap", []block{{fields: append(request, hf("x-1", raw), hf("x-2", raw), hf("x-3", raw)), frag: 4000}, {fields: request}}, 300},
		{"continuation after the cap", []block{{fields: append(request, hf("x-long", long), hf("x-long2", long)), frag: 240}}, 300},
		{"value over the string cap", []block{{fields: append(request, hf("x-long", long+long))}}, 500},
		{"bad HPACK index", []block{{raw: []byte{0xff, 0x7f}}}, 0},
		{"truncated HPACK", []block{{fields: request, raw: []byte{0x40, 0x05, 'a'}}}, 0},
		{"dynamic table size update over the limit", []block{{raw: []byte{0x3f, 0xe1, 0x7f}}}, 0},
	}
}

// sameAsFramer requires the Framer (ReadMetaHeaders) and a Reader to make
// the same frames, fields, truncation and errors (kind and code) of p.
func sameAsFramer(t *testing.T, p []byte, maxList uint32) {
	t.Helper()
	want := readAll(t, p, maxList, false)
	got := readAll(t, p, maxList, true)
	require.NotEmpty(t, want)
	assert.Equal(t, want, got)
}

// TestReaderDecodesEveryBlockAsTheFramerDoes runs the same byte streams
// through x/net's Framer (ReadMetaHeaders) and a Reader, and requires the
// same frames, fields, truncation and errors (kind and code) from both.
func TestReaderDecodesEveryBlockAsTheFramerDoes(t *testing.T) {
	for _, tc := range readerCases() {
		t.Run(tc.name, func(t *testing.T) {
			sameAsFramer(t, wire(t, tc.blocks), tc.maxList)
		})
	}
}

// TestReaderKeepsNoStringOfThePreviousBlock checks that the reused field
// slice is cleared between blocks, and that a caller's copy of the
// fields (the strings) stays intact after the next block is read.
func TestReaderKeepsNoStringOfThePreviousBlock(t *testing.T) {
	p := wire(t, []block{
		{fields: append(request, hf("x-first", "one"), hf("x-more", "1"), hf("x-more2", "2"))},
		{fields: []hpack.HeaderField{hf(":status", "200")}},
	})
	r := NewReader(http2.NewFramer(nil, bytes.NewReader(p)), 4096, 0)
	f, err := r.ReadFrame()
	require.NoError(t, err)
	require.IsType(t, &http2.HeadersFrame{}, f)
	kept := r.Block.RegularFields()
	copied := append([]hpack.HeaderField{}, kept...)
	assert.Equal(t, "POST", r.Block.PseudoValue("method"))
	assert.Equal(t, "", r.Block.PseudoValue("status"))
	require.Len(t, r.Block.PseudoFields(), 4)

	_, err = r.ReadFrame() // the PING
	require.NoError(t, err)
	_, err = r.ReadFrame()
	require.NoError(t, err)
	assert.Equal(t, "200", r.Block.PseudoValue("status"))
	assert.Nil(t, r.Block.RegularFields())
	full := r.Block.Fields[:cap(r.Block.Fields)]
	for _, f := range full[len(r.Block.Fields):] {
		assert.Equal(t, hpack.HeaderField{}, f, "no field of the last block is kept in the slice")
	}
	assert.Equal(t, "x-first", copied[2].Name, "a copy made before the next read is intact")
	assert.Equal(t, "one", copied[2].Value)
}

// BenchmarkHeaderBlock decodes a gRPC request's header block with x/net's
// meta-header reading and with a Reader, side by side.
func BenchmarkHeaderBlock(b *testing.B) {
	blocks := make([]block, 64)
	for i := range blocks {
		blocks[i] = block{fields: append(request, hf("user-agent", "grpc-go/1.7"), hf("grpc-timeout", "1S"))}
	}
	p := wire(b, blocks)
	for _, ours := range []bool{false, true} {
		name := "xnet-meta"
		if ours {
			name = "h2hdr"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			rd := bytes.NewReader(p)
			fr := http2.NewFramer(nil, rd)
			fr.MaxHeaderListSize = 16 << 10
			var r *Reader
			if ours {
				r = NewReader(fr, 4096, 16<<10)
			} else {
				fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			}
			for i := 0; i < b.N; i++ {
				var err error
				if ours {
					_, err = r.ReadFrame()
				} else {
					_, err = fr.ReadFrame()
				}
				if err != nil { // the end of the stream: start again with a fresh table
					rd.Reset(p)
					fr = http2.NewFramer(nil, rd)
					fr.MaxHeaderListSize = 16 << 10
					if ours {
						r = NewReader(fr, 4096, 16<<10)
					} else {
						fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
					}
				}
			}
		})
	}
}
