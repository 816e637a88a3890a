package h2client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2hdr"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ErrUnprocessed marks a request the server never processed: the
// connection was closing or lost before its headers were sent, the server's
// GOAWAY named a last stream below it, or the server refused the stream.
// Such a request may be sent again on another connection.
var ErrUnprocessed = errors.New("h2client: request not processed by the server")

// errClosing is returned to requests that find the connection closing.
var errClosing = fmt.Errorf("h2client: connection is closing: %w", ErrUnprocessed)

// Defaults for the options.
const (
	defaultStreamWindow   = 1 << 20
	defaultInitialWindow  = 256 << 10
	defaultConnWindow     = 4 << 20
	defaultMaxHeaderBytes = 64 << 10
	defaultReadFrameSize  = 1 << 16
	defaultReadIdle       = 30 * time.Second
	defaultPingTimeout    = 15 * time.Second
	defaultIdleTimeout    = 90 * time.Second
	defaultBufferLimit    = 8 << 20

	// initialMaxStreams is assumed until the server's SETTINGS arrive;
	// maxStreamsCap bounds what a server may announce.
	initialMaxStreams = 100
	maxStreamsCap     = 1000

	// maxWriteBuffer is how many bytes may wait for the socket before
	// writers wait for a flush (the read loop too, which stops reading a
	// peer that floods control frames without reading our answers).
	maxWriteBuffer = 1 << 20

	// readBufferSize is the read buffer per connection.
	readBufferSize = 4 << 10

	// max1xx bounds the informational responses one stream may receive.
	max1xx = 16
)

// Option sets an optional parameter of [New].
type Option func(*config)

type config struct {
	streamWindow   int32 // the most a stream's window grows to
	initialWindow  int32 // SETTINGS_INITIAL_WINDOW_SIZE, where it starts
	connWindow     int32
	maxHeaderBytes uint32
	readFrameSize  uint32
	readIdle       time.Duration
	pingTimeout    time.Duration
	idleTimeout    time.Duration
	bufferLimit    int64
	countError     func(class string)
}

// WithWindows sets the receive windows granted to the server: the most
// a stream's window grows to, and the connection's. Both are at least
// 65535; defaults 1 MiB and 4 MiB.
func WithWindows(stream, conn int32) Option {
	return func(c *config) {
		c.streamWindow = max(stream, 65535)
		c.connWindow = max(conn, 65535)
	}
}

// WithInitialStreamWindow sets the window a stream starts with
// (SETTINGS_INITIAL_WINDOW_SIZE), at least 65535 and at most the stream
// window of [WithWindows]; default 256 KiB. A stream's window grows from
// it, doubling up to the stream window, as its reader consumes the body
// (see the package doc): a response nobody reads holds this much, no
// more.
func WithInitialStreamWindow(n int32) Option {
	return func(c *config) { c.initialWindow = max(n, 65535) }
}

// WithBufferLimit bounds the response body bytes the connection holds
// unread, all its streams together; default 8 MiB, and never less than
// the stream window. Past it, the response whose reader has gone longest
// without reading loses its unread bytes: its stream is reset (CANCEL)
// unless it had ended, and its body's next Read fails.
func WithBufferLimit(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.bufferLimit = n
		}
	}
}

// WithMaxHeaderBytes bounds the decoded size of a response's header list
// (and trailers), announced as SETTINGS_MAX_HEADER_LIST_SIZE; default 64 KiB.
func WithMaxHeaderBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxHeaderBytes = uint32(min(n, math.MaxUint32))
		}
	}
}

// WithKeepalive sets when the connection is checked with a PING: after
// readIdle without a frame from the server (detected within one to two
// readIdle), and closed when no answer comes within pingTimeout; defaults
// 30 s and 15 s. A zero readIdle disables the check.
func WithKeepalive(readIdle, pingTimeout time.Duration) Option {
	return func(c *config) { c.readIdle, c.pingTimeout = readIdle, pingTimeout }
}

// WithIdleTimeout closes the connection after d without streams (detected
// within one to two d); default 90 s. Zero disables it.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) { c.idleTimeout = d }
}

// WithCountError sets a hook called with a short class name (a bounded
// set of ASCII words) each time the server breaks the protocol, and with
// "buffer_limit" each time a response loses its unread bytes to the
// buffer limit of [WithBufferLimit].
func WithCountError(f func(class string)) Option {
	return func(c *config) { c.countError = f }
}

// State is what [Conn.State] reports.
type State struct {
	Closed  bool // the connection is gone
	Closing bool // it takes no new requests (GOAWAY, shutdown, error)
	Streams int  // streams open
}

// Conn is an HTTP/2 client connection. Its methods are safe for
// concurrent use.
type Conn struct {
	conn     net.Conn
	tlsState *tls.ConnectionState
	cfg      config
	fr       *http2.Framer
	hr       *h2hdr.Reader     // reads fr, decoding header blocks (read loop)
	canon    map[string]string // canonical header names (read loop)
	done     chan struct{}     // closed when the read loop has ended

	// Writing: the framer writes into wb under wmu; whoever finds no
	// flush in progress writes everything buffered (see write.go).
	wmu      sync.Mutex
	wcond    sync.Cond // L = &wmu: a flush ended
	wb       wbuf
	spare    []byte
	flushing bool
	werr     error
	henc     *hpack.Encoder
	hbuf     wbuf
	nextID   uint32 // under wmu and mu

	// mu guards everything below and the streams' state.
	mu           sync.Mutex
	cond         sync.Cond // L = &mu: a slot, a window or the state changed
	streams      map[uint32]*stream
	active       int // streams holding a slot (sent or about to be)
	reserved     int
	maxStreams   int
	closing      bool
	closed       bool
	gotGoAway    bool
	goAwayLast   uint32 // the server's last processed stream, once gotGoAway
	seenSettings bool
	connErr      error // why the connection ended
	lastIdle     time.Time

	peerMaxFrame  uint32
	peerMaxHeader uint32 // 0: unlimited
	peerInitWin   int32
	sendWin       int64 // connection send window
	inflow        int64 // bytes the server may still send on the connection
	connUnacked   int64 // received, not yet returned with WINDOW_UPDATE

	// Response bytes received and not read yet, all streams together,
	// and the streams holding some (a list through the streams, so that
	// keeping it allocates nothing). readClock counts body reads; a
	// stream notes it when it is read (see evictLocked).
	buffered  int64
	holders   *stream
	readClock uint64

	framesRead atomic.Uint64
	pingData   [8]byte
	prevFrames uint64 // framesRead at the previous keepalive check
	pingOut    bool
	keepalive  *time.Timer
	idleTimer  *time.Timer
	closeOnce  sync.Once
}

// New starts an HTTP/2 client connection on conn, which the caller has
// dialled (and wrapped in TLS with "h2" negotiated, or not for h2c). It
// sends the connection preface and our SETTINGS at once, without waiting
// for the server's; ctx bounds that first write only. The connection
// owns conn from then on, and one goroutine reads it until it closes.
func New(ctx context.Context, conn net.Conn, opts ...Option) (*Conn, error) {
	cfg := config{
		streamWindow:   defaultStreamWindow,
		initialWindow:  defaultInitialWindow,
		connWindow:     defaultConnWindow,
		maxHeaderBytes: defaultMaxHeaderBytes,
		readFrameSize:  defaultReadFrameSize,
		readIdle:       defaultReadIdle,
		pingTimeout:    defaultPingTimeout,
		idleTimeout:    defaultIdleTimeout,
		bufferLimit:    defaultBufferLimit,
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.bufferLimit = max(cfg.bufferLimit, int64(cfg.streamWindow))
	cfg.initialWindow = min(cfg.initialWindow, cfg.streamWindow)
	cc := &Conn{
		conn:         conn,
		cfg:          cfg,
		done:         make(chan struct{}),
		streams:      map[uint32]*stream{},
		maxStreams:   initialMaxStreams,
		nextID:       1,
		peerMaxFrame: 16 << 10,
		peerInitWin:  65535,
		sendWin:      65535,
		inflow:       int64(cfg.connWindow),
		lastIdle:     time.Now(),
	}
	if tc, ok := conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := tc.ConnectionState()
		cc.tlsState = &st
	}
	cc.wcond.L = &cc.wmu
	cc.cond.L = &cc.mu
	// Reads go through a small buffer: the framer reads a frame's
	// header and payload separately.
	cc.fr = http2.NewFramer(&cc.wb, bufio.NewReaderSize(conn, readBufferSize))
	cc.fr.SetMaxReadFrameSize(cfg.readFrameSize)
	cc.hr = h2hdr.NewReader(cc.fr, 4096, cfg.maxHeaderBytes)
	cc.canon = make(map[string]string)
	cc.fr.SetReuseFrames()
	cc.henc = hpack.NewEncoder(&cc.hbuf)

	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(d)
	}
	cc.wb.b = append(cc.wb.b, http2.ClientPreface...)
	err := cc.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(cfg.initialWindow)},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: cfg.readFrameSize},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: cfg.maxHeaderBytes},
	)
	if err == nil && cfg.connWindow > 65535 {
		err = cc.fr.WriteWindowUpdate(0, uint32(cfg.connWindow-65535))
	}
	if err == nil {
		_, err = conn.Write(cc.wb.b)
	}
	cc.wb.b = cc.wb.b[:0]
	_ = conn.SetWriteDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("h2client: sending the preface: %w", err)
	}
	if cfg.readIdle > 0 {
		cc.keepalive = time.AfterFunc(cfg.readIdle, cc.checkAlive)
	}
	if cfg.idleTimeout > 0 {
		cc.idleTimer = time.AfterFunc(cfg.idleTimeout, cc.checkIdle)
	}
	go cc.readLoop()
	return cc, nil
}

// State reports whether the connection is closed or closing, and its
// open streams.
func (cc *Conn) State() State {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return State{Closed: cc.closed, Closing: cc.closing || cc.closed, Streams: cc.active}
}

// ReserveNewRequest reserves a stream for a later RoundTrip, which then
// never waits for a slot. It reports false when the connection is closing
// or at the server's MAX_CONCURRENT_STREAMS.
func (cc *Conn) ReserveNewRequest() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closing || cc.closed || cc.active+cc.reserved >= cc.maxStreams {
		return false
	}
	cc.reserved++
	return true
}

// Close closes the connection at once; requests in flight fail.
func (cc *Conn) Close() error {
	cc.shut(errors.New("h2client: connection closed"))
	<-cc.done
	return nil
}

// Shutdown stops taking requests, tells the server with GOAWAY, and
// closes the connection when its streams have ended or ctx is done
// (then closing it at once and returning ctx's error).
func (cc *Conn) Shutdown(ctx context.Context) error {
	cc.mu.Lock()
	cc.closing = true
	cc.cond.Broadcast()
	cc.mu.Unlock()
	cc.wmu.Lock()
	err := cc.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	cc.flushSyncLocked()
	if err != nil {
		cc.Close()
		return fmt.Errorf("h2client: shutdown: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		cc.mu.Lock()
		cc.cond.Broadcast()
		cc.mu.Unlock()
	})
	defer stop()
	cc.mu.Lock()
	for cc.active > 0 && !cc.closed && ctx.Err() == nil {
		cc.cond.Wait()
	}
	cc.mu.Unlock()
	cc.Close()
	return ctx.Err()
}

// shut closes the socket once; the read loop then ends every stream.
func (cc *Conn) shut(why error) {
	cc.closeOnce.Do(func() {
		cc.mu.Lock()
		if cc.connErr == nil {
			cc.connErr = why
		}
		cc.closing = true
		cc.cond.Broadcast()
		cc.mu.Unlock()
		cc.conn.Close()
	})
}

// countError reports a protocol violation by the server.
func (cc *Conn) countError(class string) {
	if cc.cfg.countError != nil {
		cc.cfg.countError(class)
	}
}

// connError ends the connection for a protocol error of the server's: a
// GOAWAY with code, then close.
func (cc *Conn) connError(code http2.ErrCode, class, msg string) error {
	cc.countError(class)
	err := fmt.Errorf("h2client: server broke the protocol (%s): %s", code, msg)
	cc.wmu.Lock()
	_ = cc.fr.WriteGoAway(0, code, nil)
	cc.flushSyncLocked()
	cc.shut(err)
	return err
}

// checkAlive runs every readIdle: when no frame came since the last run it
// sends a PING, and closes the connection when it is unanswered past
// pingTimeout.
func (cc *Conn) checkAlive() {
	n := cc.framesRead.Load()
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return
	}
	quiet := n == cc.prevFrames
	cc.prevFrames = n
	if !quiet || cc.pingOut {
		cc.mu.Unlock()
		cc.keepalive.Reset(cc.cfg.readIdle)
		return
	}
	cc.pingOut = true
	cc.pingData[0]++
	data := cc.pingData
	cc.mu.Unlock()
	cc.wmu.Lock()
	_ = cc.fr.WritePing(false, data)
	cc.flushLocked()
	time.AfterFunc(cc.cfg.pingTimeout, func() {
		cc.mu.Lock()
		late := cc.pingOut && cc.pingData == data
		cc.mu.Unlock()
		if late {
			cc.countError("ping_timeout")
			cc.shut(errors.New("h2client: server did not answer a PING in time"))
		}
	})
	cc.keepalive.Reset(cc.cfg.readIdle)
}

// checkIdle closes the connection when it has had no stream for
// idleTimeout.
func (cc *Conn) checkIdle() {
	cc.mu.Lock()
	idle := cc.active == 0 && cc.reserved == 0 && time.Since(cc.lastIdle) >= cc.cfg.idleTimeout
	closed := cc.closed
	cc.mu.Unlock()
	if closed {
		return
	}
	if idle {
		go cc.Shutdown(context.Background()) //nolint:errcheck // no streams: ends at once
		return
	}
	cc.idleTimer.Reset(cc.cfg.idleTimeout)
}

// maxStreamID is the last client stream id; past it the connection takes
// no new requests.
const maxStreamID = math.MaxInt32

// Compile-time check that Conn is an http.RoundTripper.
var _ http.RoundTripper = (*Conn)(nil)
