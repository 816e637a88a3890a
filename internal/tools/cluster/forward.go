package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// maxForwarded caps the connections the API server forwarder holds at
// once; more wait in the listener's backlog.
const maxForwarded = 256

// Forward accepts connections on ln and joins each to a new connection to
// target, until ctx ends. It runs inside the node's network namespace with
// ln opened on the host's loopback, which is how the host reaches the API
// server without an interface or route of its own.
func Forward(ctx context.Context, ln net.Listener, target string) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	slots := make(chan struct{}, maxForwarded)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer c.Close()
			d := net.Dialer{Timeout: 10 * time.Second}
			up, err := d.DialContext(ctx, "tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			select {
			case <-done:
				<-done
			case <-ctx.Done():
			}
		}()
	}
}
