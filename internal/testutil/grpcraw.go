package testutil

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HalfSentResult is what a server answered to [HalfSentGRPC].
type HalfSentResult struct {
	// Status is the grpc-status trailer (-1 when none came).
	Status int
	// Message is the grpc-message trailer.
	Message string
	// Reset is true when the server reset the stream instead.
	Reset bool
	// Elapsed is the time from just before the request headers were sent
	// to the answer: never less than a deadline the server started on them.
	Elapsed time.Duration
}

// HalfSentGRPC speaks plaintext HTTP/2 to a gRPC server at addr the way a
// stalling client would: it sends the headers of a request for method
// (such as "/pkg.Service/Method") and a message prefix announcing
// announced bytes, then only the first len(partial) bytes of it, and never
// ends the stream. It waits up to wait for the server to answer the stream
// (trailers or RST_STREAM) and fails the test if it does not.
func HalfSentGRPC(t testing.TB, addr, method string, announced int, partial []byte, wait time.Duration) HalfSentResult {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, DefaultTimeout)
	if err != nil {
		t.Fatalf("testutil: dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatalf("testutil: write preface: %v", err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatalf("testutil: write settings: %v", err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	start := time.Now() // before the server can see the headers
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatalf("testutil: write headers: %v", err)
	}
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], uint32(announced))
	if err := fr.WriteData(1, false, append(prefix, partial...)); err != nil {
		t.Fatalf("testutil: write data: %v", err)
	}
	res := HalfSentResult{Status: -1}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("testutil: no answer to the half-sent %s within %s: %v", method, wait, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			for _, hf := range f.Fields {
				switch hf.Name {
				case "grpc-status":
					if n, err := strconv.Atoi(hf.Value); err == nil {
						res.Status = n
					}
				case "grpc-message":
					res.Message = hf.Value
				}
			}
			if f.StreamEnded() {
				res.Elapsed = time.Since(start)
				return res
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				res.Reset, res.Elapsed = true, time.Since(start)
				return res
			}
		case *http2.GoAwayFrame:
			t.Fatalf("testutil: server sent GOAWAY (%v) instead of answering the stream", f.ErrCode)
		}
	}
}

// String describes the result for assertion messages.
func (r HalfSentResult) String() string {
	return fmt.Sprintf("status %d %q reset=%v after %s", r.Status, r.Message, r.Reset, r.Elapsed)
}

// GRPCAnswer is what a gRPC server answered to [RawGRPCCall].
type GRPCAnswer struct {
	HTTPStatus   int
	ContentType  string
	Code         string // grpc-status, from the head or the trailers
	Message      string // grpc-message, as sent (percent-encoded)
	TrailersOnly bool   // the status came in the response head
	Body         []byte
}

// RawGRPCCall sends one HTTP/2 request to https://addr+path as given
// (method, headers over the gRPC defaults, a header set to "" removed,
// body sent as is) with c, and reads the whole answer within
// DefaultTimeout: for holding a server's answers to malformed calls to
// grpc-go's.
func RawGRPCCall(t testing.TB, c *http.Client, addr, method, path string, header map[string]string, body []byte) GRPCAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(Context(t, 0), method, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("testutil: request: %v", err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("testutil: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("testutil: reading the answer to %s %s: %v", method, path, err)
	}
	a := GRPCAnswer{HTTPStatus: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: got}
	if a.Code = resp.Header.Get("Grpc-Status"); a.Code != "" {
		a.TrailersOnly, a.Message = true, resp.Header.Get("Grpc-Message")
	} else {
		a.Code, a.Message = resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	}
	return a
}

// GRPCFrame is one gRPC length-prefixed message with the given flag byte
// (0: not compressed).
func GRPCFrame(flag byte, msg []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}
