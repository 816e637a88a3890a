package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// loopbackOnly refuses any address that is not on loopback, so a typo in
// the script cannot send load elsewhere.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q is not a loopback IP address", addr)
	}
	return nil
}

// runEcho serves a TCP echo on -listen until the context ends.
func runEcho(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7000", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*listen); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ready addr=%s\n", ln.Addr())
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			_, _ = io.CopyBuffer(c, c, buf)
			c.Close()
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	}
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	return nil
}

// runTput writes as fast as it can on each of -conns connections to an
// echo server and counts the bytes that come back in -duration. The figure
// is payload per second; each byte crosses every proxy twice.
func runTput(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("tput", flag.ContinueOnError)
	addr := fs.String("addr", "", "echo server (or proxy) address")
	conns := fs.Int("conns", 1, "connections")
	duration := fs.Duration("duration", 10*time.Second, "measuring time")
	size := fs.Int("size", 16<<10, "write size in bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*addr); err != nil {
		return err
	}
	if *conns < 1 || *conns > 1024 || *duration <= 0 || *duration > 5*time.Minute {
		return errors.New("-conns must be 1..1024 and -duration at most 5m")
	}
	cs := make([]net.Conn, 0, *conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range *conns {
		c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	var total atomic.Int64
	var counting atomic.Bool
	var wg sync.WaitGroup
	deadline := time.Now().Add(*duration + 500*time.Millisecond)
	for _, c := range cs {
		_ = c.SetDeadline(deadline.Add(2 * time.Second))
		wg.Add(2)
		go func() {
			defer wg.Done()
			buf := make([]byte, *size)
			for i := range buf {
				buf[i] = byte(i*7 + 1)
			}
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if counting.Load() {
					total.Add(int64(n))
				}
				if err != nil {
					return
				}
			}
		}()
	}
	// 0.5s of warm-up, then count for exactly -duration.
	time.Sleep(500 * time.Millisecond)
	counting.Store(true)
	start := time.Now()
	select {
	case <-time.After(*duration):
	case <-ctx.Done():
	}
	counting.Store(false)
	got := total.Load()
	elapsed := time.Since(start)
	for _, c := range cs {
		_ = c.SetDeadline(time.Now())
	}
	wg.Wait()
	if got == 0 {
		return errors.New("no bytes came back")
	}
	fmt.Fprintf(out, "mbps=%.1f bytes=%d seconds=%.2f conns=%d\n", float64(got)/elapsed.Seconds()/1e6, got, elapsed.Seconds(), *conns)
	return nil
}

// runConnRate has -workers loops that each connect, echo one byte and
// close, for -duration, and reports completed connections per second.
func runConnRate(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("connrate", flag.ContinueOnError)
	addr := fs.String("addr", "", "echo server (or proxy) address")
	workers := fs.Int("workers", 8, "concurrent connection loops")
	duration := fs.Duration("duration", 10*time.Second, "measuring time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*addr); err != nil {
		return err
	}
	if *workers < 1 || *workers > 256 || *duration <= 0 || *duration > 5*time.Minute {
		return errors.New("-workers must be 1..256 and -duration at most 5m")
	}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(*duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := []byte{0x5a}
			in := make([]byte, 1)
			for time.Now().Before(stop) && ctx.Err() == nil {
				err := func() error {
					c, err := net.DialTimeout("tcp", *addr, 3*time.Second)
					if err != nil {
						return err
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(3 * time.Second))
					if _, err := c.Write(one); err != nil {
						return err
					}
					_, err = io.ReadFull(c, in)
					return err
				}()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					time.Sleep(10 * time.Millisecond)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	e, _ := firstErr.Load().(string)
	fmt.Fprintf(out, "cps=%.0f ok=%d errors=%d seconds=%.2f first_error=%q\n", float64(ok.Load())/elapsed.Seconds(), ok.Load(), failed.Load(), elapsed.Seconds(), e)
	if ok.Load() == 0 {
		return fmt.Errorf("no connection completed: %s", e)
	}
	return nil
}

// runLatency sends -size bytes and waits for them to come back, one at a
// time on one connection, for -duration (at most -max round trips), and
// reports percentiles in microseconds.
func runLatency(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	addr := fs.String("addr", "", "echo server (or proxy) address")
	duration := fs.Duration("duration", 10*time.Second, "measuring time")
	size := fs.Int("size", 64, "message size")
	maxN := fs.Int("max", 1_000_000, "most round trips")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*addr); err != nil {
		return err
	}
	if *size < 1 || *size > 1<<20 || *duration <= 0 || *duration > 5*time.Minute || *maxN < 1 {
		return errors.New("-size must be 1..1MiB, -duration at most 5m, -max positive")
	}
	c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(*duration + 10*time.Second))
	msg := make([]byte, *size)
	in := make([]byte, *size)
	rtt := func() (time.Duration, error) {
		t := time.Now()
		if _, err := c.Write(msg); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, in); err != nil {
			return 0, err
		}
		return time.Since(t), nil
	}
	for range 200 { // warm-up
		if _, err := rtt(); err != nil {
			return err
		}
	}
	samples := make([]time.Duration, 0, 1<<16)
	stop := time.Now().Add(*duration)
	for time.Now().Before(stop) && len(samples) < *maxN && ctx.Err() == nil {
		d, err := rtt()
		if err != nil {
			return err
		}
		samples = append(samples, d)
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	us := func(q float64) float64 { return float64(quantile(samples, q)) / 1e3 }
	fmt.Fprintf(out, "p50_us=%.1f p99_us=%.1f p999_us=%.1f n=%d\n", us(0.50), us(0.99), us(0.999), len(samples))
	return nil
}

// quantile returns the q-quantile of sorted samples (nearest rank).
func quantile[T int64 | time.Duration | float64](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// runIdle opens -conns connections, echoes one byte on each so that every
// hop is established, prints "ready", and holds them until the context
// ends or -hold passes.
func runIdle(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	addr := fs.String("addr", "", "echo server (or proxy) address")
	n := fs.Int("conns", 1000, "connections to hold")
	hold := fs.Duration("hold", time.Minute, "longest hold")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*addr); err != nil {
		return err
	}
	if *n < 1 || *n > 5000 || *hold > 10*time.Minute {
		return errors.New("-conns must be 1..5000 and -hold at most 10m")
	}
	cs := make([]net.Conn, *n)
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, *n)
	sem := make(chan struct{}, 8)
	for i := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			cs[i] = c
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			b := []byte{0x5a}
			if _, err := c.Write(b); err != nil {
				errs <- err
				return
			}
			if _, err := io.ReadFull(c, b); err != nil {
				errs <- err
				return
			}
			_ = c.SetDeadline(time.Time{})
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("opening connections: %w", err)
	}
	fmt.Fprintf(out, "ready conns=%d\n", *n)
	if f, ok := out.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	select {
	case <-ctx.Done():
	case <-time.After(*hold):
	}
	return nil
}
