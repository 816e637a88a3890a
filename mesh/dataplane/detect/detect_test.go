package detect_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/detect"
)

func TestClassifyRecognisesEachProtocolFromItsFirstBytes(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want detect.Protocol
	}{
		{"nothing yet", "", detect.Unknown},
		{"http1 get", "GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n", detect.HTTP1},
		{"http1.0", "POST /x HTTP/1.0\r\n", detect.HTTP1},
		{"http1 method prefix", "GE", detect.Unknown},
		{"http1 line without end", "GET /very/long", detect.HTTP1},
		{"http1 with bare LF", "GET / HTTP/1.1\n", detect.HTTP1},
		{"http version 2 in request line", "GET / HTTP/2.0\r\n", detect.HTTP1},
		{"HTTP/1.2", "GET /x HTTP/1.2\r\n", detect.HTTP1},
		{"a target is enough", "GET /", detect.HTTP1},
		{"asterisk form", "OPTIONS *", detect.HTTP1},
		{"double space before the target", "GET  /x HTTP/1.1\r\n", detect.HTTP1},
		{"tab before the target", "GET\t/x HTTP/1.1\r\n", detect.HTTP1},
		{"leading empty lines", "\r\n\r\nGET /x HTTP/1.1\r\n", detect.HTTP1},
		{"leading whitespace only", "\r\n ", detect.Unknown},
		{"lower-case method", "get /x HTTP/1.1\r\n", detect.HTTP1},
		{"long method", strings.Repeat("G", 100) + " /x HTTP/1.1\r\n", detect.HTTP1},
		{"absolute form", "GET http://a/ HTTP/1.1\r\n", detect.HTTP1},
		{"absolute form, any scheme", "GET ws://a/ HTTP/1.1\r\n", detect.HTTP1},
		{"absolute form prefix", "GET htt", detect.Unknown},
		{"authority form", "CONNECT a.example:443 HTTP/1.1\r\n", detect.HTTP1},
		{"lower-case version", "CONNECT a.example:443 http/1.1\r\n", detect.HTTP1},
		{"a text line that is no request", "get key\r\n", detect.Opaque},
		{"a text line still open", "HELLO world", detect.Unknown},
		{"a token followed by CRLF", "PING\r\n", detect.Opaque},
		{"h2 preface", detect.H2Preface, detect.HTTP2},
		{"h2 preface prefix", "PRI * HTTP/2", detect.Unknown},
		{"PRI as an HTTP/1 method", "PRI * HTTP/1.1\r\n", detect.HTTP1},
		{"tls record", "\x16\x03\x01\x02\x00", detect.TLS},
		{"tls first byte only", "\x16", detect.Unknown},
		{"0x16 without version 3", "\x16\x01", detect.Opaque},
		{"redis binary", "*1\r\n$4\r\nPING\r\n", detect.Opaque},
		{"postgres startup", "\x00\x00\x00\x08\x04\xd2\x16\x2f", detect.Opaque},
		{"control byte in an HTTP target (the parser answers 400)", "GET /\x01", detect.HTTP1},
		{"a long token is still undecided", strings.Repeat("A", 21), detect.Unknown},
		{"a token as long as a request line is HTTP (answered 414)", strings.Repeat("A", detect.MaxRequestLine), detect.HTTP1},
		{"control byte after the target", "SET key\x01", detect.Opaque},
		{"request line too long is still HTTP (answered 414)", "GET /" + strings.Repeat("a", detect.MaxRequestLine), detect.HTTP1},
		{"long line that is no request target", "GET " + strings.Repeat("a", detect.MaxRequestLine), detect.Opaque},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, detect.Classify([]byte(c.in)))
		})
	}
}

func TestClassifyIsStableOnceFinal(t *testing.T) {
	for _, in := range []string{"GET / HTTP/1.1\r\n", detect.H2Preface, "\x16\x03\x03", "SSH-2.0-x\r\n", "GET\t/", "X y HTTP/1.1\n", "get key\r\n"} {
		final := detect.Classify([]byte(in))
		require.NotEqual(t, detect.Unknown, final, in)
		assert.Equal(t, final, detect.Classify([]byte(in+"more bytes")), in)
	}
}

// clientHello returns the bytes a real crypto/tls client sends first.
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		defer c.Close()
		_ = tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"weft.transport/1"}}).Handshake()
	}()
	require.NoError(t, s.SetReadDeadline(time.Now().Add(5*time.Second)))
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if _, herr := detect.ClientHelloSNI(out); herr != detect.ErrIncomplete || err != nil {
			return out
		}
	}
}

func TestClientHelloSNIReadsTheServerNameOfARealClient(t *testing.T) {
	hello := clientHello(t, "web.shop.serviceaccount.identity.linkerd.cluster.local")
	assert.Equal(t, detect.TLS, detect.Classify(hello))
	name, err := detect.ClientHelloSNI(hello)
	require.NoError(t, err)
	assert.Equal(t, "web.shop.serviceaccount.identity.linkerd.cluster.local", name)
}

func TestClientHelloSNIAsksForMoreOnEveryPrefix(t *testing.T) {
	hello := clientHello(t, "a.example")
	for i := 0; i < len(hello); i++ {
		_, err := detect.ClientHelloSNI(hello[:i])
		require.ErrorIs(t, err, detect.ErrIncomplete, "prefix %d of %d", i, len(hello))
	}
}

func TestClientHelloSNIReassemblesAHelloSplitAcrossRecords(t *testing.T) {
	hello := clientHello(t, "split.example")
	body := hello[5:]
	half := len(body) / 2
	var split []byte
	split = append(split, 0x16, 0x03, 0x01, byte(half>>8), byte(half))
	split = append(split, body[:half]...)
	rest := len(body) - half
	split = append(split, 0x16, 0x03, 0x01, byte(rest>>8), byte(rest))
	split = append(split, body[half:]...)
	name, err := detect.ClientHelloSNI(split)
	require.NoError(t, err)
	assert.Equal(t, "split.example", name)
}

func TestClientHelloSNIWithoutServerNameIsEmpty(t *testing.T) {
	hello := clientHello(t, "")
	name, err := detect.ClientHelloSNI(hello)
	require.NoError(t, err)
	assert.Empty(t, name)
}

func TestClientHelloSNIRejectsOtherBytes(t *testing.T) {
	for _, in := range []string{"GET / HTTP/1.1\r\n", "\x16\x03\x01\x00\x00", "\x16\x03\x01\x00\x04\x02\x00\x00\x00", "\x17\x03\x03\x00\x10"} {
		_, err := detect.ClientHelloSNI([]byte(in))
		assert.ErrorIs(t, err, detect.ErrNotClientHello, "%q", in)
	}
}

func TestClientHelloSNIRejectsATruncatedExtensionBlock(t *testing.T) {
	hello := clientHello(t, "x.example")
	// Claim a handshake shorter than the real one: the extensions no longer fit.
	cut := append([]byte(nil), hello...)
	body := cut[5 : 5+int(cut[3])<<8|int(cut[4])]
	n := len(body) - 4 - 10
	body[1], body[2], body[3] = byte(n>>16), byte(n>>8), byte(n)
	_, err := detect.ClientHelloSNI(cut)
	assert.ErrorIs(t, err, detect.ErrNotClientHello)
}

func FuzzClassify(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte(detect.H2Preface))
	f.Add([]byte("\r\nGET  /x HTTP/1.2\n"))
	f.Add([]byte("CONNECT a:1 http/1.1\r\n"))
	f.Add([]byte("GET ws"))
	f.Add([]byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := detect.Classify(b)
		if p != detect.Unknown {
			for _, more := range []byte{'x', '\x01', '\n', ' '} {
				if q := detect.Classify(append(b[:len(b):len(b)], more)); q != p {
					t.Fatalf("final answer %v changed to %v with one more byte %q", p, q, more)
				}
			}
		}
		_, _ = detect.ClientHelloSNI(b)
	})
}

func ExampleClassify() {
	fmt.Println(detect.Classify([]byte("GET / HTTP/1.1\r\n")))
	fmt.Println(detect.Classify([]byte(detect.H2Preface)))
	fmt.Println(detect.Classify([]byte("*1\r\n$4\r\nPING\r\n")))
	fmt.Println(detect.Classify([]byte("GET")))
	// Output:
	// http/1
	// h2
	// opaque
	// unknown
}
