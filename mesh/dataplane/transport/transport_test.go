package transport_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// The package starts no goroutine; none may be left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHeaderEncodesTheDocumentedLayout(t *testing.T) {
	b, err := transport.Header{Port: 8080, Protocol: transport.HTTP2, Name: "web:80"}.Append(nil)
	require.NoError(t, err)
	want := append([]byte("WEFT"), 1, 2, 0x1f, 0x90, 6)
	want = append(want, "web:80"...)
	assert.Equal(t, want, b)
}

func TestHeaderRoundTripsThroughReadLeavingTheRestOfTheStream(t *testing.T) {
	h := transport.Header{Port: 5432, Protocol: transport.Opaque, Name: "db.shop.svc.cluster.local:5432"}
	b, err := h.Append(nil)
	require.NoError(t, err)
	r := bytes.NewReader(append(b, "payload"...))
	got, err := transport.Read(r)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	rest, _ := io.ReadAll(r)
	assert.Equal(t, "payload", string(rest))
}

func TestParseReportsAPrefixAsIncomplete(t *testing.T) {
	b, err := transport.Header{Port: 1, Name: "abc"}.Append(nil)
	require.NoError(t, err)
	for i := 0; i < len(b); i++ {
		_, _, err := transport.Parse(b[:i])
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "prefix of %d bytes", i)
	}
	h, n, err := transport.Parse(b)
	require.NoError(t, err)
	assert.Equal(t, len(b), n)
	assert.Equal(t, uint16(1), h.Port)
}

func TestParseRejectsBadHeaders(t *testing.T) {
	cases := map[string][]byte{
		"bad magic":        []byte("HTTP/1.1 200"),
		"other version":    {'W', 'E', 'F', 'T', 2, 0, 0, 80, 0},
		"unknown protocol": {'W', 'E', 'F', 'T', 1, 9, 0, 80, 0},
		"port zero":        {'W', 'E', 'F', 'T', 1, 0, 0, 0, 0},
		"name too long":    {'W', 'E', 'F', 'T', 1, 0, 0, 80, 254},
		"control in name":  {'W', 'E', 'F', 'T', 1, 0, 0, 80, 2, 'a', '\n'},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := transport.Parse(b)
			assert.ErrorIs(t, err, transport.ErrMalformed)
			_, err = transport.Read(bytes.NewReader(b))
			assert.ErrorIs(t, err, transport.ErrMalformed)
		})
	}
}

func TestAppendRefusesHeadersThatCannotBeEncoded(t *testing.T) {
	_, err := transport.Header{Port: 0}.Append(nil)
	assert.ErrorIs(t, err, transport.ErrMalformed)
	_, err = transport.Header{Port: 1, Name: strings.Repeat("a", 254)}.Append(nil)
	assert.ErrorContains(t, err, "254 bytes")
}

func TestReadOfATruncatedStreamIsMalformed(t *testing.T) {
	_, err := transport.Read(bytes.NewReader([]byte("WEF")))
	assert.ErrorIs(t, err, transport.ErrMalformed)
}

func FuzzParse(f *testing.F) {
	good, _ := transport.Header{Port: 443, Protocol: transport.HTTP1, Name: "a.b:443"}.Append(nil)
	f.Add(good)
	f.Add([]byte("WEFT"))
	f.Add([]byte{'W', 'E', 'F', 'T', 1, 0, 0, 80, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := transport.Parse(b)
		if err != nil {
			return
		}
		again, err := h.Append(nil)
		if err != nil {
			t.Fatalf("parsed header does not encode: %v", err)
		}
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("round trip changed bytes: %x vs %x", again, b[:n])
		}
		r, err := transport.Read(bytes.NewReader(b))
		if err != nil || r != h {
			t.Fatalf("Read disagrees with Parse: %v %v", r, err)
		}
	})
}

// FuzzReadAgreesWithParse: Read, which the inbound proxy runs on a
// peer's stream, accepts exactly what Parse accepts, the same header, and
// consumes exactly the header's bytes, never the application's after it.
func FuzzReadAgreesWithParse(f *testing.F) {
	good, _ := transport.Header{Port: 8080, Protocol: transport.HTTP2, Name: "web.shop.svc.cluster.local:8080"}.Append(nil)
	f.Add(append(good, "GET / HTTP/1.1\r\n"...))
	f.Add([]byte{'W', 'E', 'F', 'T', 1, 2, 0, 0, 0})
	f.Add([]byte{'W', 'E', 'F', 'T', 1, 3, 0, 80, 0})
	f.Add([]byte{'W', 'E', 'F', 'T', 1, 1, 0, 80, 254})
	f.Add([]byte{'W', 'E', 'F', 'T', 1, 1, 0, 80, 2, ' ', 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		ph, n, perr := transport.Parse(b)
		r := bytes.NewReader(b)
		h, err := transport.Read(r)
		if perr != nil {
			if err == nil {
				t.Fatalf("Read accepted %x, which Parse refuses: %v", b, perr)
			}
			return
		}
		if err != nil || h != ph {
			t.Fatalf("Read gave %+v, %v; Parse gave %+v", h, err, ph)
		}
		if used := len(b) - r.Len(); used != n {
			t.Fatalf("Read consumed %d bytes of a %d-byte header", used, n)
		}
	})
}

func ExampleHeader_Append() {
	b, _ := transport.Header{Port: 8080, Protocol: transport.Opaque}.Append(nil)
	fmt.Printf("%q\n", b)
	h, _ := transport.Read(bytes.NewReader(b))
	fmt.Println(h.Port, h.Protocol)
	// Output:
	// "WEFT\x01\x00\x1f\x90\x00"
	// 8080 opaque
}
