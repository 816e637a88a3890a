package h2server

//lint:file-ignore SA1019 x/net's HTTP/2 Server (ServeConn) is the baseline this benchmark measures the proxy's own server against.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// writeCounter counts the socket writes of served connections.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(p)
}

// benchServe serves the unary handler on loopback with one of the two
// servers and returns its address and the write counter.
func benchServe(b *testing.B, xnet bool) (string, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	writes := new(atomic.Int64)
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(unaryHandler)
	xs := &http2.Server{MaxConcurrentStreams: 100}
	cfg := &Config{MaxConcurrentStreams: 100}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wc := writeCounter{Conn: c, n: writes}
			if xnet {
				go xs.ServeConn(wc, &http2.ServeConnOpts{Context: ctx, Handler: h})
			} else {
				go ServeConn(ctx, wc, h, cfg)
			}
		}
	}()
	b.Cleanup(func() { ln.Close(); cancel(); <-done })
	return ln.Addr().String(), writes
}

// BenchmarkUnaryCall is one gRPC-like unary call (a 5-byte-prefixed
// 64-byte message, answered with the message and grpc-status trailers)
// over one h2c connection, served by this package and by x/net's server
// with the same handler and client. writes/op counts the server's socket
// writes per call.
func BenchmarkUnaryCall(b *testing.B) {
	msg := grpcFrame(bytes.Repeat([]byte("m"), 64))
	for _, srv := range []string{"h2server", "xnet"} {
		b.Run("server="+srv, func(b *testing.B) {
			addr, writes := benchServe(b, srv == "xnet")
			c := h2cClient(b)
			url := "http://" + addr + "/svc/Method"
			call := func() {
				req, _ := http.NewRequest("POST", url, bytes.NewReader(msg))
				req.Header.Set("Content-Type", "application/grpc")
				req.Header.Set("Te", "trailers")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Trailer.Get("Grpc-Status") != "0" {
					b.Fatal("no grpc-status trailer")
				}
			}
			call() // connection set up outside the measurement
			writes.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				call()
			}
			b.StopTimer()
			b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
			c.CloseIdleConnections()
		})
	}
}
