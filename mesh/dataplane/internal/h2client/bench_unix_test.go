//go:build unix

package h2client_test

//lint:file-ignore SA1019 x/net's ClientConn and Server are the baseline this benchmark measures the proxy's own client against.

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// syscallConn counts the reads and writes that reach the socket.
type syscallConn struct {
	net.Conn
	reads, writes atomic.Int64
}

func (c *syscallConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *syscallConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// grpcLikeHandler answers a unary gRPC-shaped call: the request message
// read whole, a 5-byte-prefixed response message, grpc-status trailers.
func grpcLikeHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	w.WriteHeader(200)
	msg := make([]byte, 5+32)
	binary.BigEndian.PutUint32(msg[1:5], 32)
	_, _ = w.Write(msg)
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("Grpc-Message", "")
}

// roundTripper is what both clients offer.
type roundTripper interface {
	RoundTrip(*http.Request) (*http.Response, error)
}

// BenchmarkUnaryGRPCRoundTrip compares one unary gRPC-shaped call through
// h2client and through x/net's ClientConn, against the same server (x/net's
// HTTP/2 server with a minimal handler, and grpc-go's interop service), on
// one h2c loopback connection, one call at a time. h2client-unready-body
// sends a body without ReadReady (as x/net's server's request bodies are):
// headers first, then the body from a goroutine. writes/op and reads/op
// are the client's socket calls per call.
func BenchmarkUnaryGRPCRoundTrip(b *testing.B) {
	reqMsg := testutil.GRPCFrame(0, make([]byte, 20))
	servers := []struct {
		name string
		addr func(b *testing.B) (string, string, []byte)
	}{
		{"xnet-server", func(b *testing.B) (string, string, []byte) {
			s := startH2Bench(b, http.HandlerFunc(grpcLikeHandler))
			return s, "/bench.Service/Unary", reqMsg
		}},
		{"grpc-go-server", func(b *testing.B) (string, string, []byte) {
			return startGRPC(b), "/grpc.testing.TestService/UnaryCall", unaryCallMsg(b)
		}},
	}
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			addr, path, msg := srv.addr(b)
			for _, client := range []string{"h2client", "h2client-unready-body", "xnet"} {
				b.Run(client, func(b *testing.B) {
					raw, err := net.Dial("tcp", addr)
					require.NoError(b, err)
					conn := &syscallConn{Conn: raw}
					var rt roundTripper
					if client != "xnet" {
						cc, err := h2client.New(context.Background(), conn)
						require.NoError(b, err)
						defer cc.Close()
						rt = cc
					} else {
						cc, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(conn)
						require.NoError(b, err)
						defer cc.Close()
						rt = cc
					}
					call := func() {
						var body io.Reader = readyBody{bytes.NewReader(msg)}
						if client != "h2client" {
							// No ReadReady: what x/net's server hands the proxy.
							body = io.NopCloser(bytes.NewReader(msg))
						}
						req, _ := http.NewRequest("POST", "http://"+addr+path, body)
						req.Header.Set("Content-Type", "application/grpc")
						req.Header.Set("Te", "trailers")
						req.Header.Set("User-Agent", "")
						resp, err := rt.RoundTrip(req)
						if err != nil {
							b.Fatal(err)
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.Trailer.Get("Grpc-Status") != "0" {
							b.Fatalf("grpc-status %q", resp.Trailer.Get("Grpc-Status"))
						}
					}
					call()
					w0, r0 := conn.writes.Load(), conn.reads.Load()
					cpu0 := cpuTime()
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						call()
					}
					b.StopTimer()
					b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(conn.writes.Load()-w0)/float64(b.N), "writes/op")
					b.ReportMetric(float64(conn.reads.Load()-r0)/float64(b.N), "reads/op")
				})
			}
		})
	}
}

// cpuTime is the process's user and system CPU time in nanoseconds
// (client and server both run here, the same for both clients).
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func unaryCallMsg(b *testing.B) []byte {
	// SimpleRequest{response_size: 32, payload: {body: 20 bytes}}, encoded
	// by hand to keep proto out of the loop.
	body := []byte{0x10, 32, 0x1a, 22, 0x12, 20}
	return testutil.GRPCFrame(0, append(body, make([]byte, 20)...))
}

func startH2Bench(b *testing.B, h http.Handler) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := &http2.Server{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
		}
	}()
	b.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String()
}
