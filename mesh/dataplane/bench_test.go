package dataplane_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testutil"
)

// benchTargets returns the address a client dials for each way of
// reaching the echo application: directly, through the Weft proxy pair
// (outbound -> mutual TLS -> inbound), and through a plain Go forwarder
// (io.Copy with 32 KiB buffers, no TLS) for reference.
func benchTargets(b *testing.B) map[string]string {
	app := startEcho(b, "")
	pr := startPair(b, pairOptions{noTap: true, app: app})
	return map[string]string{
		"direct":     app.ln.Addr().String(),
		"weft-pair":  pr.clientAddr,
		"go-io-copy": startForwarder(b, app.ln.Addr().String()),
	}
}

// startForwarder is the "obvious Go forwarder" baseline.
func startForwarder(b testing.TB, to string) string {
	ln := testutil.Listen(b)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { io.Copy(s, c); s.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, s)
			}()
		}
	}()
	return ln.Addr().String()
}

// opaqueMsg opens the layer-4 benchmarks' connections: bytes that
// protocol detection classifies as opaque at once (an HTTP request line
// would make the proxies speak HTTP to the echo application).
var opaqueMsg = [18]byte{0x00, 0x01, 0x02, 0x03, 0xfe, 0xff, 'w', 'e', 'f', 't', '-', 'l', '4', 0x00, 0x00, 0x10, 0x20, 0x30}

var benchOrder = []string{"direct", "weft-pair", "go-io-copy"}

// BenchmarkThroughput streams 64 KiB writes to the echo application over 1
// and 16 connections while a reader drains the echo.
func BenchmarkThroughput(b *testing.B) {
	targets := benchTargets(b)
	for _, name := range benchOrder {
		for _, conns := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/conns=%d", name, conns), func(b *testing.B) {
				chunk := make([]byte, 64<<10)
				b.SetBytes(int64(len(chunk)))
				var cs []net.Conn
				for i := 0; i < conns; i++ {
					c, err := net.Dial("tcp", targets[name])
					if err != nil {
						b.Fatal(err)
					}
					cs = append(cs, c)
					go io.Copy(io.Discard, c)
				}
				defer func() {
					for _, c := range cs {
						c.Close()
					}
				}()
				b.ResetTimer()
				var wg sync.WaitGroup
				per := b.N / conns
				for i, c := range cs {
					n := per
					if i == 0 {
						n += b.N % conns
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := 0; j < n; j++ {
							if _, err := c.Write(chunk); err != nil {
								return
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkConnections opens a connection, exchanges one small message and
// closes it: new connections per second through each path.
func BenchmarkConnections(b *testing.B) {
	targets := benchTargets(b)
	for _, name := range benchOrder {
		b.Run(name, func(b *testing.B) {
			msg := opaqueMsg[:]
			buf := make([]byte, len(msg))
			start := time.Now()
			for i := 0; i < b.N; i++ {
				c, err := net.Dial("tcp", targets[name])
				if err != nil {
					b.Fatal(err)
				}
				c.Write(msg)
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
		})
	}
}

// BenchmarkEchoLatency measures the round trip of a 64-byte message on one
// open connection and reports the 50th and 99th percentiles.
func BenchmarkEchoLatency(b *testing.B) {
	targets := benchTargets(b)
	for _, name := range benchOrder {
		b.Run(name, func(b *testing.B) {
			c, err := net.Dial("tcp", targets[name])
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg := make([]byte, 64)
			copy(msg, opaqueMsg[:])
			buf := make([]byte, 64)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				c.Write(msg)
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkIdleConnectionMemory holds 500 connections open after one small
// echo each and reports the heap and stack they cost, per connection, over
// the direct baseline, and the goroutines each holds. For weft-pair the
// figure covers both proxies (each holds two sockets per connection);
// bytes/conn/proxy halves it. With WEFT_BENCH_IDLE_HEAPPROFILE=FILE set,
// a heap profile is written while the weft-pair connections are open
// (read it with go tool pprof -sample_index=inuse_space).
//
//	go test -run XXX -bench IdleConnectionMemory -benchtime 3x ./mesh/dataplane
func BenchmarkIdleConnectionMemory(b *testing.B) {
	const n = 500
	if os.Getenv("WEFT_BENCH_IDLE_HEAPPROFILE") != "" {
		defer func(old int) { runtime.MemProfileRate = old }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1
	}
	targets := benchTargets(b)
	var goroutines float64 // per connection, in the last measure
	measure := func(addr string) (uint64, func()) {
		before := settledMemory()
		g0 := runtime.NumGoroutine()
		stackBefore := stackInuse()
		var cs []net.Conn
		for i := 0; i < n; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
			c.Write(opaqueMsg[:])
			buf := make([]byte, len(opaqueMsg))
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond) // past the TLS copy loops' linger
		after := settledMemory()
		goroutines = float64(runtime.NumGoroutine()-g0) / n
		b.Logf("%s: heap+stack %d -> %d bytes, stack %d -> %d, goroutines %d -> %d", addr, before, after, stackBefore, stackInuse(), g0, runtime.NumGoroutine())
		if f := os.Getenv("WEFT_BENCH_IDLE_HEAPPROFILE"); f != "" && addr == targets["weft-pair"] {
			writeHeapProfile(b, f)
		}
		return after - before, func() {
			for _, c := range cs {
				c.Close()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for i := 0; i < b.N; i++ {
		direct, closeDirect := measure(targets["direct"])
		directG := goroutines
		closeDirect()
		for _, name := range []string{"weft-pair", "go-io-copy"} {
			total, closeAll := measure(targets[name])
			closeAll()
			per := float64(int64(total)-int64(direct)) / n
			if name == "weft-pair" {
				b.ReportMetric(per, "weft-pair-bytes/conn")
				b.ReportMetric(per/2, "weft-bytes/conn/proxy")
				b.ReportMetric((goroutines-directG)/2, "weft-goroutines/conn/proxy")
			} else {
				b.ReportMetric(per, "go-io-copy-bytes/conn")
			}
		}
	}
}

func writeHeapProfile(b *testing.B, name string) {
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

func stackInuse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}

func settledMemory() uint64 {
	var ms runtime.MemStats
	for i := 0; i < 4; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}
