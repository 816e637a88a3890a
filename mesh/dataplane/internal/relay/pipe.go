package relay

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Counter counts the bytes a direction moves (a transport series, or two
// at once).
type Counter interface{ Add(float64) }

// Stats is where one side of a pipe records the error that ended its
// copy: read errors on the source's side, write errors on the
// destination's.
type Stats interface{ Fail(error) }

// Ends are the two connections of a pipe and what it counts on them.
type Ends struct {
	// Client is the accepted connection, Server the one the proxy opened.
	Client, Server net.Conn
	// ToClient and ToServer count the bytes each direction moves.
	ToClient, ToServer Counter
	// ClientStats and ServerStats record each side's error; ServerStats
	// may be nil (the connection is not counted).
	ClientStats, ServerStats Stats
}

// NewPipe prepares the copies of a pipe between e.Client and e.Server;
// Start runs them. Each direction runs on a goroutine of its own while it
// has bytes to move and, on Linux, parks in poller (nil: never) after
// linger (busyLinger when not positive) without data: its goroutine exits
// and no buffer is held until the source is readable again (see flow).
// Handing the copies to fresh goroutines also lets the accepting
// goroutine, whose stack grew during detection and the TLS handshake,
// exit. The direction that finishes last closes both connections and
// calls done.
func NewPipe(poller *Poller, linger time.Duration, e Ends, done func()) *Pipe {
	ps := &Pipe{poller: poller, linger: linger, client: e.Client, server: e.Server, done: done}
	if ps.linger <= 0 {
		ps.linger = busyLinger
	}
	ps.left.Store(2)
	ps.flows[0].init(ps, e.Client, e.Server, e.ToClient, e.ServerStats, e.ClientStats)
	ps.flows[1].init(ps, e.Server, e.Client, e.ToServer, e.ClientStats, e.ServerStats)
	return ps
}

// Start runs the pipe's two directions and returns at once.
func (ps *Pipe) Start() {
	go ps.flows[0].run()
	go ps.flows[1].run()
}

// Pipe is what a pipe keeps for its two directions.
type Pipe struct {
	mu      sync.Mutex
	closing bool // Close ran: nothing parks any more
	poller  *Poller
	linger  time.Duration // busyLinger, or a test's
	client  net.Conn
	server  net.Conn
	left    atomic.Int32 // directions not finished
	done    func()
	flows   [2]flow
}

// finish ends one direction; the last one closes both connections and
// calls done.
func (ps *Pipe) finish() {
	if ps.left.Add(-1) == 0 {
		ps.client.Close()
		ps.server.Close()
		ps.done()
	}
}

// Close closes both connections, which ends both directions: a
// running one sees its reads fail; a parked one (which no socket event
// would wake: closing a socket drops it from epoll silently) has its
// registration cancelled before the sockets close and is finished here.
func (ps *Pipe) Close() {
	var parked [2]*flow
	n := 0
	ps.mu.Lock()
	ps.closing = true
	for i := range ps.flows {
		f := &ps.flows[i]
		if f.state == flowParked {
			ps.poller.unregister(f.raw, f.token)
			f.state = flowEnded
			parked[n] = f
			n++
		}
	}
	ps.mu.Unlock()
	ps.client.Close()
	ps.server.Close()
	for range parked[:n] {
		ps.finish()
	}
}

type flowState uint8

const (
	flowRunning flowState = iota // a goroutine owns the direction
	flowParked                   // registered in the idle poller, no goroutine
	flowEnded                    // finished while parked
)

// flow is one direction of a pipe: bytes from src to dst.
type flow struct {
	ps      *Pipe
	dst     net.Conn
	src     net.Conn
	count   Counter
	from    Stats // src's side: read errors are recorded here (may be nil)
	to      Stats // dst's side: write errors are recorded here (may be nil)
	tcp     *net.TCPConn
	tls     *tls.Conn
	raw     syscall.RawConn    // src's socket; nil when the direction cannot park
	state   flowState          // guarded by ps.mu
	token   uint64             // guarded by ps.mu; the poller's, while parked
	noPark  bool               // registering failed once: wait on the goroutine
	ready   func(uintptr) bool // peekReady on peekErr, for a TCP source
	peekErr syscall.Errno
}

func (f *flow) init(ps *Pipe, dst, src net.Conn, count Counter, from, to Stats) {
	f.ps, f.dst, f.src, f.count, f.from, f.to = ps, dst, src, count, from, to
	var sock net.Conn
	switch s := src.(type) {
	case *net.TCPConn:
		f.tcp, sock = s, s
	case *tls.Conn:
		f.tls, sock = s, s.NetConn()
		if r, ok := sock.(replayer); ok {
			if c := r.Replayed(); c != nil {
				sock = c // the ClientHello it replayed is consumed
			}
		}
	}
	if tc, ok := sock.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			f.raw = rc
		}
	}
	if f.tcp != nil && f.raw == nil {
		f.tcp = nil // the generic copy
	}
	if f.tcp != nil {
		f.ready = func(fd uintptr) bool { return peekReady(fd, &f.peekErr) }
	}
}

// run moves bytes until the direction ends or parks; a parked direction
// is run again by the poller when its source is readable.
func (f *flow) run() {
	var err error
	switch {
	case f.tcp != nil:
		err = f.copyTCP()
	case f.tls != nil:
		err = f.copyTLS()
	default:
		err = copyConn(f.dst, f.src, f.count)
	}
	if err == errParked {
		return // the flow belongs to the poller now: touch nothing
	}
	f.end(err)
}

// errParked is the error of a copy loop that parked its direction.
var errParked = errors.New("relay: parked")

// end shuts dst's write side after a clean end of src (or closes both
// connections when that is not possible or the copy failed, which also ends
// the other direction), then finishes the direction.
func (f *flow) end(err error) {
	if err == nil {
		if hc, ok := f.dst.(HalfCloser); ok && hc.CloseWrite() == nil {
			f.ps.finish()
			return
		}
	} else {
		f.failed(err)
	}
	f.ps.Close()
	f.ps.finish()
}

// failed records the error that ended the copy on the side it came from.
func (f *flow) failed(err error) {
	if err == nil || IsClosedErr(err) {
		return
	}
	side := f.from
	var we writeError
	if errors.As(err, &we) {
		side = f.to
	}
	if side != nil {
		side.Fail(err)
	}
}

// replayer is a connection that first replays bytes read from it before
// it was piped (the dataplane's replayConn). Replayed returns the
// connection under it once every replayed byte was read, nil before.
type replayer interface{ Replayed() net.Conn }

// canPark reports whether the direction may park in the idle poller.
func (f *flow) canPark() bool { return f.raw != nil && f.ps.poller != nil && !f.noPark }

// park registers the direction in the idle poller. It returns true when
// parked (the caller's goroutine must return at once: the poller may
// already have started the next one), false with a nil error when the
// poller could not take it (the caller waits on its goroutine from now on),
// net.ErrClosed when the pipe is closing.
func (f *flow) park() (bool, error) {
	ps := f.ps
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closing {
		return false, net.ErrClosed
	}
	tok, ok := ps.poller.register(f)
	if !ok {
		f.noPark = true
		return false, nil
	}
	f.state, f.token = flowParked, tok
	return true, nil
}

// wake resumes the direction parked under tok on a new goroutine, unless
// the registration was cancelled meanwhile.
func (f *flow) wake(tok uint64) {
	ps := f.ps
	ps.mu.Lock()
	if f.state != flowParked || f.token != tok {
		ps.mu.Unlock()
		return
	}
	f.state, f.token = flowRunning, 0
	ps.mu.Unlock()
	go f.run()
}

// copyTCP copies from a plaintext TCP source. While idle it waits for
// readability with a zero-copy peek and holds no buffer; it takes a pooled
// buffer only when bytes are waiting. After busyLinger without data it
// parks the direction (errParked). It returns nil at EOF.
func (f *flow) copyTCP() error {
	src, rc := f.tcp, f.raw
	lingering := false
	var last time.Time
	for {
		if !lingering && f.canPark() {
			last = time.Now()
			_ = src.SetReadDeadline(last.Add(f.ps.linger))
			lingering = true
		}
		err := rc.Read(f.ready)
		if err == nil && f.peekErr != 0 {
			err = &net.OpError{Op: "read", Net: "tcp", Source: src.LocalAddr(), Addr: src.RemoteAddr(),
				Err: os.NewSyscallError("recvfrom", f.peekErr)}
		}
		if err != nil {
			if !lingering || !IsTimeout(err) {
				return err
			}
			if idle := time.Since(last); idle < f.ps.linger {
				_ = src.SetReadDeadline(last.Add(f.ps.linger))
				continue
			}
			parked, err := f.park()
			if parked {
				return errParked
			}
			if err != nil {
				return err
			}
			_ = src.SetReadDeadline(time.Time{})
			lingering = false
			continue
		}
		buf := GetBuf()
		for {
			n, err := src.Read(*buf)
			if n > 0 {
				if werr := f.forward((*buf)[:n]); werr != nil {
					PutBuf(buf)
					return werr
				}
				if lingering {
					last = time.Now()
				}
			}
			if err != nil {
				if lingering && IsTimeout(err) {
					// The linger's deadline, not the stream's end: a
					// stream that never drains outlives it. The wait
					// above re-arms it from the last byte.
					break
				}
				PutBuf(buf)
				return eofIsNil(err)
			}
			if n < len(*buf) {
				break // drained: wait without the buffer
			}
		}
		PutBuf(buf)
	}
}

// copyTLS copies from a TLS source. While idle it waits in a one-byte read
// (the record stays in the TLS layer) holding no buffer, takes a pooled
// buffer for the burst and gives it back after busyLinger without data.
// Quiet for busyLinger, it parks the direction (errParked): a read of the
// TLS layer timed out, which in crypto/tls means no complete record is
// buffered (Conn.Read only reads the socket when it lacks one) and leaves
// no error behind (a timeout is not recorded as the connection's error).
// A partial record stays buffered; its rest must come from the socket. A
// wake-up that brings only post-handshake messages (session tickets, key
// updates) yields no bytes and parks again after busyLinger. It returns nil
// at EOF.
func (f *flow) copyTLS() error {
	src := f.tls
	var first [1]byte
	for {
		park := f.canPark()
		if park {
			_ = src.SetReadDeadline(time.Now().Add(f.ps.linger))
		}
		// Idle: no buffer held; the TLS layer keeps the record.
		n, err := src.Read(first[:])
		if err != nil {
			if park && IsTimeout(err) {
				if parked, err := f.parkTLS(); parked || err != nil {
					return err
				}
				continue
			}
			return eofIsNil(err)
		}
		if n == 0 {
			continue
		}
		buf := GetBuf()
		(*buf)[0] = first[0]
		// Take what the TLS layer already holds without touching the socket.
		_ = src.SetReadDeadline(aLongTimeAgo)
		m, err := src.Read((*buf)[1:])
		if werr := f.forward((*buf)[:1+m]); werr != nil {
			PutBuf(buf)
			return werr
		}
		if err != nil && !IsTimeout(err) {
			PutBuf(buf)
			return eofIsNil(err)
		}
		// Busy: blocking reads with the buffer until the stream pauses for
		// busyLinger.
		last := time.Now()
		_ = src.SetReadDeadline(last.Add(f.ps.linger))
		for {
			n, err := src.Read(*buf)
			if n > 0 {
				if werr := f.forward((*buf)[:n]); werr != nil {
					PutBuf(buf)
					return werr
				}
				last = time.Now()
			}
			if err != nil {
				if !IsTimeout(err) {
					PutBuf(buf)
					return eofIsNil(err)
				}
				if time.Since(last) < f.ps.linger {
					_ = src.SetReadDeadline(last.Add(f.ps.linger))
					continue
				}
				break
			}
		}
		PutBuf(buf)
		if f.canPark() {
			if parked, err := f.parkTLS(); parked || err != nil {
				return err
			}
		}
		_ = src.SetReadDeadline(time.Time{})
	}
}

// forward writes b to dst and counts it; a failure is dst's (writeError).
func (f *flow) forward(b []byte) error {
	if _, err := f.dst.Write(b); err != nil {
		return writeError{err}
	}
	f.count.Add(float64(len(b)))
	return nil
}

// parkTLS parks a TLS direction whose last read timed out; false and nil
// when it must wait on its goroutine instead.
func (f *flow) parkTLS() (bool, error) {
	parked, err := f.park()
	if parked {
		return true, errParked
	}
	if err != nil {
		return false, err
	}
	_ = f.tls.SetReadDeadline(time.Time{})
	return false, nil
}
