package h2server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2hdr"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Config is what a server connection needs. Zero values take the
// defaults named on each field.
type Config struct {
	// MaxConcurrentStreams is advertised to the client; streams beyond it
	// are refused with REFUSED_STREAM. Default 100.
	MaxConcurrentStreams uint32
	// MaxHeaderBytes caps a request's decoded header list (and so any one
	// field). Default 1 MiB.
	MaxHeaderBytes int
	// StreamWindow and ConnectionWindow are the receive windows granted
	// to the client per stream and per connection. Defaults 1 MiB and
	// 4 MiB.
	StreamWindow     int32
	ConnectionWindow int32
	// BufferLimit bounds the request body bytes a connection holds
	// unread, all its streams together. The connection window is given
	// back as bytes arrive (only a stream's own window holds back a
	// handler that does not read), so without it memory would be the
	// stream window times the streams. Past it, the stream whose handler
	// has gone longest without reading its body (or, never read, whose
	// unread bytes came first) loses its unread bytes: its body's Read fails, and its
	// stream is reset (CANCEL) unless the client had finished sending.
	// Default twice ConnectionWindow; never less than StreamWindow.
	BufferLimit int64
	// IdleTimeout closes (with GOAWAY) a connection with no stream for
	// that long. Zero: never.
	IdleTimeout time.Duration
	// PingInterval sends a PING when nothing was read for that long, and
	// PingTimeout closes the connection when nothing arrives within it
	// after the PING. Defaults 30 s and 15 s; a negative PingInterval
	// disables keepalive.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// ResetBudget is how many premature stream resets (streams reset
	// less than a second after they opened, by the client or by the
	// server because of the client's frames) a connection may cause
	// before the ratio check ends it. Default 100.
	ResetBudget int
	// WriteTimeout closes the connection when one write of queued frames
	// does not complete within it: the client stopped reading. Default
	// 10 s.
	WriteTimeout time.Duration
	// CountError is told the class of every protocol error (a short
	// token such as "data_flow" or "headers_even").
	CountError func(class string)
	// OnAbuse is told, once per connection, why a connection was ended
	// for abuse (a reason such as "http2-rapid-reset"; see the package
	// doc for the list), before the connection is closed.
	OnAbuse func(reason string)
	// Logger receives connection errors at debug level.
	Logger *slog.Logger
	// Streams, when set, serves the requests its Accept takes at frame
	// level (streamapi.go); the others go to the http.Handler.
	Streams *StreamHandler
}

// Fixed limits.
const (
	maxReadFrameSize = 16 << 10 // the frames we accept: the protocol's minimum
	headerTableSize  = 4096     // HPACK tables both ways
	highWater        = 64 << 10 // queued output past which writers wait for the socket
	maxWriteFrame    = 16 << 10 // the largest frame we write, whatever the client allows
	prefaceTimeout   = 10 * time.Second
	closeLinger      = time.Second // reading after a final GOAWAY before closing
	maxCanonCache    = 256
	controlBatch     = 4 << 10 // queued answers the read loop flushes without waiting for a pause
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func (c *Config) withDefaults() Config {
	out := *c
	if out.MaxConcurrentStreams == 0 {
		out.MaxConcurrentStreams = 100
	}
	if out.MaxHeaderBytes <= 0 {
		out.MaxHeaderBytes = 1 << 20
	}
	if out.StreamWindow <= 0 {
		out.StreamWindow = 1 << 20
	}
	if out.ConnectionWindow <= 0 {
		out.ConnectionWindow = 4 << 20
	}
	if out.StreamWindow < 65535 {
		out.StreamWindow = 65535
	}
	if out.ConnectionWindow < 65535 {
		out.ConnectionWindow = 65535
	}
	if out.BufferLimit <= 0 {
		out.BufferLimit = 2 * int64(out.ConnectionWindow)
	}
	out.BufferLimit = max(out.BufferLimit, int64(out.StreamWindow))
	if out.PingInterval == 0 {
		out.PingInterval = 30 * time.Second
	}
	if out.PingTimeout <= 0 {
		out.PingTimeout = 15 * time.Second
	}
	if out.ResetBudget <= 0 {
		out.ResetBudget = 100
	}
	if out.WriteTimeout <= 0 {
		out.WriteTimeout = 10 * time.Second
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

var (
	errStreamClosed = errors.New("h2server: stream closed")
	errConnClosed   = errors.New("h2server: connection closed")
	errBodyClosed   = errors.New("h2server: request body closed")
	errAbuse        = errors.New("h2server: connection ended for abuse")
)

// conn is one server connection.
type conn struct {
	cfg     Config
	nc      net.Conn
	handler http.Handler
	baseCtx context.Context
	remote  string
	tls     *tls.ConnectionState

	br *bufio.Reader
	rf *http2.Framer // read side; only the read loop touches it
	hr *h2hdr.Reader // reads rf, decoding header blocks (read loop)

	framesRead atomic.Uint64
	pool       handlerPool
	handlers   sync.WaitGroup
	canon      map[string]string // canonical header names, read loop only

	mu         sync.Mutex
	flushDone  sync.Cond // a flush ended (or the connection failed)
	out        []byte    // encoded frames waiting to be written
	spare      []byte
	flushing   bool
	werr       error       // the connection is unusable for writes
	outFrames  int         // frames in out
	ctlBytes   int         // bytes of out that the server's own frames take
	ctlFrames  int         // the server's own frames in out
	ackQueued  int         // PING acknowledgements in out
	ackTimer   *time.Timer // flushes acknowledgements held back (holdAcksLocked)
	ackArmed   bool
	peakBytes  int // the most out ever held
	peakFrames int
	lim        limits // flood and reset accounting
	abuse      string // why the connection is being ended for abuse
	wf         *http2.Framer
	henc       *hpack.Encoder
	hbuf       outBuffer
	lower      map[string]string   // lower-case response header names
	trailerBuf []hpack.HeaderField // scratch for a response's trailers (mu)

	streams     map[uint32]*stream
	running     int       // handlers running, or waiting to start (pending)
	pending     []*stream // new streams whose handlers start with the next dispatch (workers.go)
	notRun      int       // streams reset before their handlers started
	maxID       uint32
	sendWin     int64  // connection send window
	sendPeak    int64  // the largest the connection send window has been
	initialWin  int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame   int    // the frames we write: the client's SETTINGS_MAX_FRAME_SIZE, at most maxWriteFrame
	inflow      int64  // connection receive window left
	unsent      int64  // received connection bytes not yet returned
	buffered    int64  // request body bytes received and not read, all streams
	readClock   uint64 // counts body reads and bytes coming to empty buffers (see evictLocked)
	unacked     int    // our SETTINGS not yet acknowledged
	sawSettings bool
	goAway      bool // GOAWAY sent: no new streams
	goAwayCode  http2.ErrCode
	closing     bool // the read loop is lingering before close
	idleSince   time.Time
	idleTimer   *time.Timer
	pingTimer   *time.Timer
	pingState   uint8 // 0 waiting for silence, 1 PING sent
	pingSeen    uint64
	stopCtx     func() bool
}

// ServeConn serves HTTP/2 on nc, whose next bytes are the client
// preface, until the connection ends; it returns once every handler it
// started has returned. Requests' contexts carry ctx's values but not its
// cancellation: when ctx is done the connection shuts down gracefully
// (GOAWAY; streams in flight finish). ServeConn does not close nc's
// underlying listener; it closes nc.
func ServeConn(ctx context.Context, nc net.Conn, handler http.Handler, cfg *Config) {
	serveConn(ctx, nc, handler, cfg, nil)
}

// serveConn is ServeConn; ended, when set, sees the connection once it
// is over (tests read its bounds).
func serveConn(ctx context.Context, nc net.Conn, handler http.Handler, cfg *Config, ended func(*conn)) {
	c := &conn{
		cfg:        cfg.withDefaults(),
		nc:         nc,
		handler:    handler,
		baseCtx:    context.WithoutCancel(ctx),
		remote:     nc.RemoteAddr().String(),
		streams:    make(map[uint32]*stream),
		sendWin:    65535,
		sendPeak:   65535,
		initialWin: 65535,
		peerFrame:  16384,
		canon:      make(map[string]string),
		lower:      make(map[string]string),
	}
	if cs, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := cs.ConnectionState()
		c.tls = &st
	}
	c.flushDone.L = &c.mu
	c.inflow = int64(c.cfg.ConnectionWindow)
	c.wf = http2.NewFramer(outWriter{c}, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.henc.SetMaxDynamicTableSizeLimit(headerTableSize)
	c.br = bufio.NewReaderSize(nc, 4096)
	c.rf = http2.NewFramer(nil, c.br)
	c.rf.SetMaxReadFrameSize(maxReadFrameSize)
	c.hr = h2hdr.NewReader(c.rf, headerTableSize, uint32(c.cfg.MaxHeaderBytes))
	c.hr.OnContinuation = c.continuation
	c.lim.init()

	c.pool.init()
	c.serve(ctx)
	c.mu.Lock()
	c.dropPendingLocked()
	c.mu.Unlock()
	c.handlers.Wait()
	c.pool.stop()
	if ended != nil {
		c.mu.Lock()
		ended(c)
		c.mu.Unlock()
	}
}

func (c *conn) serve(ctx context.Context) {
	defer c.nc.Close()
	c.mu.Lock()
	settings := []http2.Setting{
		{ID: http2.SettingMaxFrameSize, Val: maxReadFrameSize},
		{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.MaxConcurrentStreams},
		{ID: http2.SettingMaxHeaderListSize, Val: uint32(c.cfg.MaxHeaderBytes)},
		{ID: http2.SettingHeaderTableSize, Val: headerTableSize},
		{ID: http2.SettingInitialWindowSize, Val: uint32(c.cfg.StreamWindow)},
	}
	_ = c.wf.WriteSettings(settings...)
	c.unacked++
	if d := c.cfg.ConnectionWindow - 65535; d > 0 {
		_ = c.wf.WriteWindowUpdate(0, uint32(d))
	}
	err := c.flushLocked()
	c.mu.Unlock()
	if err != nil {
		c.shutdown(err)
		return
	}

	_ = c.nc.SetReadDeadline(time.Now().Add(prefaceTimeout))
	var pre [len(clientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil || string(pre[:]) != clientPreface {
		c.count("bad_preface")
		c.shutdown(fmt.Errorf("h2server: bad client preface: %w", errors.Join(err)))
		return
	}
	_ = c.nc.SetReadDeadline(time.Time{})

	c.stopCtx = context.AfterFunc(ctx, func() { c.startGoAway(http2.ErrCodeNo) })
	defer c.stopCtx()
	c.startTimers()

	for {
		f, err := c.hr.ReadFrame()
		c.framesRead.Add(1)
		c.lim.contRun = 0 // read loop only
		if err == nil {
			err = c.process(f)
		}
		if err != nil && !c.handleError(f, err) {
			c.shutdown(err)
			return
		}
		c.mu.Lock()
		if c.abuse != "" {
			c.mu.Unlock()
			c.shutdown(errAbuse)
			return
		}
		if c.ctlFrames > maxQueuedControlFrames || c.ctlBytes > maxQueuedControlBytes {
			// Another goroutine is writing (the read loop writes itself
			// past controlBatch): the client is not taking our answers as
			// fast as it provokes them.
			c.abuseLocked("http2-output-queue-full", http2.ErrCodeEnhanceYourCalm)
			c.mu.Unlock()
			c.shutdown(errAbuse)
			return
		}
		if c.closing {
			c.mu.Unlock()
			c.linger()
			c.shutdown(errConnClosed)
			return
		}
		// Answers to the client's frames (SETTINGS and PING acks,
		// resets, window updates) go out once the next frame is not
		// already here, so that a batch of frames gets one write, or when
		// enough of them wait.
		buffered := c.frameBuffered()
		if len(c.pending) > 0 && !buffered {
			c.dispatchLocked()
		}
		if len(c.out) > 0 && (len(c.out) >= controlBatch || !buffered) && (buffered || !c.holdAcksLocked()) {
			_ = c.flushLocked()
		}
		c.mu.Unlock()
	}
}

// frameBuffered reports whether a whole frame is buffered, so that the
// next ReadFrame will not block.
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < 9 {
		return false
	}
	h, err := c.br.Peek(9)
	if err != nil {
		return false
	}
	return n >= 9+(int(h[0])<<16|int(h[1])<<8|int(h[2]))
}

// handleError answers a protocol error; it reports false when the
// connection must end now.
func (c *conn) handleError(f http2.Frame, err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		c.count("stream_" + se.Code.String())
		c.mu.Lock()
		if se.StreamID > c.maxID && se.StreamID%2 == 1 {
			c.maxID = se.StreamID // a malformed HEADERS still used its ID
			c.openedLocked(se.StreamID)
		}
		c.resetLocked(se.StreamID, se.Code)
		c.mu.Unlock()
		return true
	case errors.As(err, &ce):
		c.count("conn_" + http2.ErrCode(ce).String())
		c.cfg.Logger.Debug("HTTP/2 connection error", "client", c.remote, "err", err)
		if f != nil {
			c.mu.Lock()
			if id := f.Header().StreamID; id > c.maxID && id%2 == 1 {
				c.maxID = id
			}
			c.mu.Unlock()
		}
		c.fail(http2.ErrCode(ce))
		return true
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.count("frame_too_large")
		c.fail(http2.ErrCodeFrameSize)
		return true
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.cfg.Logger.Debug("HTTP/2 connection ended", "client", c.remote, "err", err)
	}
	return false
}

func (c *conn) count(class string) {
	if c.cfg.CountError != nil {
		c.cfg.CountError(class)
	}
}

// fail sends GOAWAY with code and ends the connection after a linger.
func (c *conn) fail(code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.goAway, c.goAwayCode, c.closing = true, code, true
	mark := len(c.out)
	_ = c.wf.WriteGoAway(c.maxID, code, nil)
	c.controlDone(mark)
	_ = c.flushLocked()
}

// startGoAway starts a graceful shutdown: GOAWAY, streams in flight
// finish, then the connection closes.
func (c *conn) startGoAway(code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.startGoAwayLocked(code)
}

func (c *conn) startGoAwayLocked(code http2.ErrCode) {
	if c.goAway || c.werr != nil {
		return
	}
	c.goAway, c.goAwayCode = true, code
	mark := len(c.out)
	_ = c.wf.WriteGoAway(c.maxID, code, nil)
	c.controlDone(mark)
	_ = c.flushLocked()
	c.maybeCloseLocked()
}

// maybeCloseLocked ends a connection that sent GOAWAY once it has no
// stream left: the read loop lingers, then closes.
func (c *conn) maybeCloseLocked() {
	if !c.goAway || c.closing || len(c.streams) > 0 || c.running > 0 {
		return
	}
	c.closing = true
	// Wake the read loop: it reads on until the client closes or the
	// linger ends.
	_ = c.nc.SetReadDeadline(time.Now().Add(closeLinger))
}

// linger reads and drops what the client still sends after the final
// GOAWAY, so that closing does not reset the connection before the
// client has read it.
func (c *conn) linger() {
	_ = c.nc.SetReadDeadline(time.Now().Add(closeLinger))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.br, 1<<20))
}

// shutdown ends the connection: every stream fails, writers and readers
// wake up.
func (c *conn) shutdown(err error) {
	c.mu.Lock()
	reason := c.abuse
	if reason != "" {
		c.flushGoAwayLocked()
	}
	if c.werr == nil {
		c.werr = errConnClosed
	}
	for id, s := range c.streams {
		s.abortLocked(errConnClosed)
		delete(c.streams, id)
	}
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	if c.ackTimer != nil {
		c.ackTimer.Stop()
	}
	c.flushDone.Broadcast()
	c.mu.Unlock()
	// The reason is reported before the close, so that whoever sees the
	// connection end (the client, a test) finds it counted.
	if reason != "" && c.cfg.OnAbuse != nil {
		c.cfg.OnAbuse(reason)
	}
	_ = c.nc.Close()
	_ = err
}

// flushGoAwayLocked writes what is queued (the final GOAWAY) before an
// abusive connection is closed, within about closeLinger. Another
// goroutine may be in the middle of a write: its deadline is cut to
// closeLinger and it is waited for, since closing under it would drop the
// GOAWAY and the client would see only a reset.
func (c *conn) flushGoAwayLocked() {
	start := time.Now()
	if c.flushing {
		_ = c.nc.SetWriteDeadline(start.Add(closeLinger))
	}
	for c.flushing && c.werr == nil && time.Since(start) < closeLinger {
		c.flushDone.Wait()
	}
	_ = c.flushLocked()
}

// startTimers arms the idle and keepalive timers.
func (c *conn) startTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idleSince = time.Now()
	if d := c.cfg.IdleTimeout; d > 0 {
		c.idleTimer = time.AfterFunc(d, c.checkIdle)
	}
	if c.cfg.PingInterval > 0 {
		c.pingSeen = c.framesRead.Load()
		c.pingTimer = time.AfterFunc(c.cfg.PingInterval, c.checkPing)
	}
}

func (c *conn) checkIdle() {
	c.mu.Lock()
	d := c.cfg.IdleTimeout
	if c.werr != nil {
		c.mu.Unlock()
		return
	}
	if len(c.streams) == 0 && c.running == 0 {
		if idle := time.Since(c.idleSince); idle >= d {
			c.mu.Unlock()
			c.startGoAway(http2.ErrCodeNo)
			return
		} else {
			d -= idle
		}
	}
	c.idleTimer.Reset(d)
	c.mu.Unlock()
}

// checkPing sends a PING after a silence of PingInterval and closes the
// connection when the silence lasts PingTimeout more.
func (c *conn) checkPing() {
	n := c.framesRead.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return
	}
	if n != c.pingSeen {
		c.pingSeen, c.pingState = n, 0
		c.pingTimer.Reset(c.cfg.PingInterval)
		return
	}
	if c.pingState == 1 {
		c.count("ping_timeout")
		c.werr = errConnClosed
		_ = c.nc.Close()
		return
	}
	c.pingState = 1
	// The timer is armed before the flush: a flush that blocks on a
	// client that stopped reading must not keep the timeout from firing.
	c.pingTimer.Reset(c.cfg.PingTimeout)
	_ = c.wf.WritePing(false, [8]byte{'w', 'e', 'f', 't'})
	_ = c.flushLocked()
}
