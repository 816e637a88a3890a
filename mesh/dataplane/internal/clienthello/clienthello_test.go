package clienthello_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/clienthello"
)

// helloOf returns the bytes a real crypto/tls client sends first for
// serverName (the ClientHello), captured from one end of a pipe.
func helloOf(t *testing.T, serverName string, cfg *tls.Config) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	cfg.ServerName = serverName
	cfg.InsecureSkipVerify = serverName == "" // a client without a name must skip verification
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tls.Client(client, cfg).Handshake()
	}()
	require.NoError(t, server.SetReadDeadline(time.Now().Add(10*time.Second)))
	var hello []byte
	buf := make([]byte, 64<<10)
	// The record header says how long the ClientHello record is.
	for len(hello) < 5 || len(hello) < 5+int(hello[3])<<8|int(hello[4]) {
		n, err := server.Read(buf)
		require.NoError(t, err)
		hello = append(hello, buf[:n]...)
	}
	client.Close()
	<-done
	return hello
}

func TestReadReturnsTheServerNameAndEveryByteItRead(t *testing.T) {
	hello := helloOf(t, "Blue.Example.com", nil)
	after := []byte("pipelined early bytes")
	name, read, err := clienthello.Read(io.MultiReader(bytes.NewReader(hello), bytes.NewReader(after)))
	require.NoError(t, err)
	assert.Equal(t, "blue.example.com", name, "lower case")
	assert.True(t, bytes.HasPrefix(read, hello), "the ClientHello, unchanged, comes first")
	assert.True(t, bytes.HasPrefix(append(append([]byte(nil), hello...), after...), read), "nothing but what was read, in order")
}

func TestReadReturnsNoNameForAClientHelloWithoutSNI(t *testing.T) {
	hello := helloOf(t, "", nil)
	name, read, err := clienthello.Read(bytes.NewReader(hello))
	require.NoError(t, err)
	assert.Equal(t, "", name)
	assert.Equal(t, hello, read)
}

func TestReadReadsAClientHelloSplitIntoTinyReads(t *testing.T) {
	hello := helloOf(t, "api.example.org", nil)
	name, read, err := clienthello.Read(&oneByteReader{b: hello})
	require.NoError(t, err)
	assert.Equal(t, "api.example.org", name)
	assert.Equal(t, hello, read)
}

func TestReadRefusesWhatIsNotTLS(t *testing.T) {
	for name, in := range map[string][]byte{
		"HTTP/1":            []byte("GET / HTTP/1.1\r\nHost: blue.example.com\r\n\r\n"),
		"an alert record":   {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28},
		"a truncated hello": helloOf(t, "blue.example.com", nil)[:40],
		"nothing":           nil,
	} {
		t.Run(name, func(t *testing.T) {
			got, read, err := clienthello.Read(bytes.NewReader(in))
			require.Error(t, err)
			assert.ErrorIs(t, err, clienthello.ErrNotTLS)
			assert.Empty(t, got)
			assert.True(t, bytes.HasPrefix(in, read), "what was read is returned")
		})
	}
}

func TestReadStopsAtItsLimit(t *testing.T) {
	// A ClientHello of 60,000 bytes (under crypto/tls's own limit on a
	// handshake message) in full records: more than Max, so the reader
	// stops there.
	var in []byte
	for i := 0; i < 4; i++ {
		in = append(in, 0x16, 0x03, 0x01, 0x40, 0x00)
		body := make([]byte, 16384)
		if i == 0 {
			copy(body, []byte{0x01, 0x00, 0xea, 0x60})
		}
		in = append(in, body...)
	}
	_, read, err := clienthello.Read(bytes.NewReader(in))
	require.ErrorIs(t, err, clienthello.ErrTooLong)
	assert.Len(t, read, clienthello.Max)
	assert.Equal(t, in[:clienthello.Max], read)
}

func TestReadRefusesAServerNameThatIsNoHostname(t *testing.T) {
	// crypto/tls sends what it is given (it only checks the name when it
	// verifies the certificate).
	hello := helloOf(t, "under_score.example.com", nil)
	_, _, err := clienthello.Read(bytes.NewReader(hello))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a DNS hostname")
}

func TestReadEndsWithItsReaderWhenTheClientStalls(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	hello := helloOf(t, "blue.example.com", nil)
	go func() { _, _ = client.Write(hello[:20]) }()
	require.NoError(t, server.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, read, err := clienthello.Read(server)
	require.Error(t, err)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) || strings.Contains(err.Error(), "timeout"), "the reader's deadline ends it: %v", err)
	assert.Len(t, read, 20)
}

// FuzzRead: whatever the bytes, Read returns without panicking, reads at
// most Max bytes, returns exactly a prefix of its input, and a name only
// when it is a lower-case hostname.
func FuzzRead(f *testing.F) {
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		name, read, err := clienthello.Read(bytes.NewReader(in))
		if len(read) > clienthello.Max {
			t.Fatalf("read %d bytes, more than %d", len(read), clienthello.Max)
		}
		if !bytes.HasPrefix(in, read) {
			t.Fatalf("returned bytes that are not a prefix of the input")
		}
		if err != nil && name != "" {
			t.Fatalf("a name with an error")
		}
		if name != strings.ToLower(name) || strings.ContainsAny(name, " _/\x00") {
			t.Fatalf("name %q is not a lower-case hostname", name)
		}
	})
}

type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}
