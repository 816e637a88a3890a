package h2hdr

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"
)

// FuzzH2hdrAgainstFramer is a differential target: a header block of
// the fuzzer's HPACK bytes, split into a HEADERS frame and CONTINUATION
// frames of frag bytes, then a well-formed request block on the next
// stream (so that the state a block leaves behind is compared too), is
// read by x/net's Framer with ReadMetaHeaders and by a Reader with the
// same header list cap. Both must give the same frames, fields in order,
// truncation, and errors (stream or connection, and the code). Seeds: the
// first block of each case of the unit test.
func FuzzH2hdrAgainstFramer(f *testing.F) {
	for _, tc := range readerCases() {
		b := tc.blocks[0]
		f.Add(hpackBytes(f, b.fields, b.raw), uint16(b.frag), uint16(tc.maxList), b.end)
	}
	f.Fuzz(func(t *testing.T, hb []byte, frag, maxList uint16, end bool) {
		if len(hb) > 64<<10 {
			return
		}
		p := wire(t, []block{{raw: hb, frag: int(frag), end: end}, {fields: request}})
		sameAsFramer(t, p, uint32(maxList))
	})
}

// hpackBytes encodes fields with a fresh HPACK encoder, followed by raw.
func hpackBytes(t testing.TB, fields []hpack.HeaderField, raw []byte) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		require.NoError(t, enc.WriteField(f))
	}
	return append(hb.Bytes(), raw...)
}
