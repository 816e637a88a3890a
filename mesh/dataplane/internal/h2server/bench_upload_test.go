package h2server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkUpload16MiB posts a 16 MiB body over one h2c connection (x/net's
// client, default windows) to a handler that reads it in 32 KiB reads:
// the request-body path (receive, buffer, give window back).
func BenchmarkUpload16MiB(b *testing.B) {
	const size = 16 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.CopyBuffer(io.Discard, r.Body, make([]byte, 32<<10))
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go ServeConn(ctx, c, h, &Config{})
		}
	}()
	b.Cleanup(func() { ln.Close(); cancel(); <-done })
	c := h2cClient(b)
	url := "http://" + ln.Addr().String() + "/"
	post := func() {
		resp, err := c.Post(url, "application/octet-stream", io.LimitReader(zeros{}, size))
		if err != nil {
			b.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != strconv.Itoa(size) {
			b.Fatalf("the handler read %s bytes", got)
		}
	}
	post()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		post()
	}
	b.StopTimer()
	c.CloseIdleConnections()
}
