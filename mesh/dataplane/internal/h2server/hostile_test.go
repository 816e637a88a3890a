package h2server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
)

// hostileServer serves one connection at a time from a loopback
// listener, with small socket buffers on the server's side so that a
// client that does not read fills them quickly.
type hostileServer struct {
	addr   string
	served chan *connStats // one per connection, when ServeConn returned
	abuse  chan string
}

// connStats is what a served connection saw.
type connStats struct {
	peakBytes, peakFrames int
	abuse                 string
}

func startHostileServer(t *testing.T, h http.Handler, tweak func(*Config)) *hostileServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &hostileServer{addr: ln.Addr().String(), served: make(chan *connStats, 16), abuse: make(chan string, 16)}
	cfg := &Config{MaxConcurrentStreams: 100, MaxHeaderBytes: 64 << 10}
	cfg.OnAbuse = func(reason string) {
		select {
		case hs.abuse <- reason:
		default: // the connection's own stats carry it too
		}
	}
	if tweak != nil {
		tweak(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			_ = nc.(*net.TCPConn).SetWriteBuffer(4 << 10)
			_ = nc.(*net.TCPConn).SetReadBuffer(4 << 10)
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := &connStats{}
				serveConn(ctx, nc, h, cfg, func(c *conn) {
					st.peakBytes, st.peakFrames, st.abuse = c.peakBytes, c.peakFrames, c.abuse
				})
				hs.served <- st
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("connections did not end after shutdown")
		}
	})
	return hs
}

// waitServed waits for the server to end a connection.
func (hs *hostileServer) waitServed(t *testing.T) *connStats {
	t.Helper()
	select {
	case st := <-hs.served:
		return st
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatal("the server never ended the connection")
		return nil
	}
}

// deafClient is a client that never reads: its receive buffer is small
// and nothing drains it.
type deafClient struct {
	c  net.Conn
	fr *http2.Framer
}

func dialDeaf(t *testing.T, addr string, settings ...http2.Setting) *deafClient {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4<<10))
	t.Cleanup(func() { c.Close() })
	_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second)) // hang guard only
	dc := &deafClient{c: c, fr: http2.NewFramer(c, nil)}
	dc.fr.AllowIllegalWrites = true
	_, err = io.WriteString(c, clientPreface)
	require.NoError(t, err)
	require.NoError(t, dc.fr.WriteSettings(settings...))
	require.NoError(t, dc.fr.WriteSettingsAck())
	return dc
}

// block encodes a request's header block with extra fields.
func (dc *deafClient) block(path string, extra ...string) []byte {
	var buf writeBuf
	enc := hpack.NewEncoder(&buf)
	fields := append([]string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", path}, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.b
}

type writeBuf struct{ b []byte }

func (w *writeBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func TestAClientThatStopsReadingCannotGrowTheOutputQueue(t *testing.T) {
	// Finding 1 (issue 27): a client that does not read and sends HEADERS
	// with an invalid field value makes the server reset one stream per
	// frame. The reset budget is out of the way here (it would end the
	// connection first); the queue's own bound and the write timeout are
	// what end it.
	const attempts = 200000
	bigBody := make([]byte, 8<<20)
	handlerIn := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			handlerIn <- struct{}{}
			_, _ = w.Write(bigBody) // blocks once the client's buffers are full
		}
	})
	for _, tc := range []struct {
		name         string
		writing      bool // a handler is stuck writing a large response
		writeTimeout time.Duration
		wantAbuse    string
	}{
		// The read loop writes its own answers: it waits for the socket,
		// and the write timeout ends the connection.
		{name: "read loop writing", writeTimeout: 2 * time.Second},
		// A handler's write is stuck: the read loop's answers pile up
		// behind it until their bound ends the connection. On a busy
		// machine the read loop may instead have become the writer of
		// the handler's queued DATA before the flood (it flushes when no
		// one else does), and then it is held in that write until the
		// write timeout ends the connection: either way the queue stayed
		// within its bound, which is what this checks.
		{name: "handler writing", writing: true, writeTimeout: 10 * time.Second, wantAbuse: "http2-output-queue-full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := startHostileServer(t, h, func(c *Config) {
				c.ResetBudget = 1 << 30
				c.WriteTimeout = tc.writeTimeout
			})
			dc := dialDeaf(t, hs.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
			require.NoError(t, dc.fr.WriteWindowUpdate(0, 1<<31-1-65535))
			id := uint32(1)
			if tc.writing {
				require.NoError(t, dc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: dc.block("/big"), EndStream: true, EndHeaders: true}))
				<-handlerIn
				id = 3
			}
			bad := dc.block("/", "x-bad", "a\x00b")
			sent := 0
			for ; sent < attempts; sent++ {
				if err := dc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: bad, EndStream: true, EndHeaders: true}); err != nil {
					break
				}
				id += 2
			}
			st := hs.waitServed(t)
			t.Logf("sent %d bad HEADERS; the connection's queue peaked at %d bytes, %d frames", sent, st.peakBytes, st.peakFrames)
			assert.Less(t, sent, attempts, "the server ended the connection before the client was done")
			assert.LessOrEqual(t, st.peakBytes, QueueBound, "queued output stays within its bound")
			assert.LessOrEqual(t, st.peakFrames, QueueBoundFrames, "queued frames stay within their bound")
			if tc.wantAbuse != "" && st.abuse == "" {
				t.Logf("ended by the write timeout, not by %s: the read loop was the writer (docs/limits.md)", tc.wantAbuse)
			} else if tc.wantAbuse != "" {
				assert.Equal(t, tc.wantAbuse, st.abuse)
			}
		})
	}
}

func TestResetsDecidedWhileTheClientDoesNotReadCountInTheBudget(t *testing.T) {
	// Finding 2 (issue 27, MadeYouReset against a client that does not
	// read): WINDOW_UPDATE of 0 on each stream just opened makes the
	// server reset it. The resets count when the server decides them,
	// whether or not they can be written.
	const budget = 100
	var started atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		<-r.Context().Done()
	})
	hs := startHostileServer(t, h, func(c *Config) { c.ResetBudget = budget; c.WriteTimeout = time.Minute })
	dc := dialDeaf(t, hs.addr)
	blk := dc.block("/")
	sent := 0
	for id := uint32(1); id < 80000; id += 2 {
		if dc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true}) != nil ||
			dc.fr.WriteWindowUpdate(id, 0) != nil {
			break
		}
		sent++
	}
	st := hs.waitServed(t)
	t.Logf("%d streams sent, %d handlers started", sent, started.Load())
	assert.Equal(t, "http2-rapid-reset", st.abuse)
	assert.LessOrEqual(t, started.Load(), int64(budget+1), "no stream past the budget reached the handler")
}

func TestAPingFloodOneFramePerTLSRecordIsCounted(t *testing.T) {
	// Finding 6 (issue 27): over TLS each PING can arrive in its own
	// record, so a count made per read of the socket saw one frame each
	// time. The frame loop counts frames.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cert := testutil.NewAnchor(t, testutil.CertOptions{Name: "test anchor"}).Leaf(t, testutil.CertOptions{Name: "h2server.test"}).TLS
	abuse := make(chan string, 1)
	served := make(chan struct{})
	go func() {
		defer close(served)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		tc := tls.Server(nc, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
		ServeConn(context.Background(), tc, http.NotFoundHandler(), &Config{OnAbuse: func(r string) { abuse <- r }})
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // hang guard only
	_, err = io.WriteString(c, clientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c) // each frame is one Write: one record
	require.NoError(t, fr.WriteSettings())
	var acks atomic.Int64
	readDone := make(chan error, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				readDone <- err
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acks.Add(1)
			}
		}
	}()
	const attempts = 1000000
	sent := 0
	start := time.Now()
	for ; sent < attempts; sent++ {
		if fr.WritePing(false, [8]byte{byte(sent)}) != nil {
			break
		}
	}
	<-served
	<-readDone
	elapsed := time.Since(start)
	t.Logf("%d PINGs sent, %d acknowledged", sent, acks.Load())
	assert.Less(t, sent, attempts, "the flood ended the connection")
	select {
	case r := <-abuse:
		assert.Equal(t, "http2-control-flood", r)
	default:
		t.Error("no abuse reported")
	}
	// Answered: at most what the paced bucket and the control bucket hold
	// and drain while the flood lasted (the server sent no DATA to earn
	// more). A PING goes to the control bucket when it arrives while an
	// earlier acknowledgement is still unwritten, which a busy machine's
	// slow writer makes common (726 of 784 answered in one run under
	// load, against 262 for the paced bucket alone). elapsed covers the
	// whole flood, so the bound only errs on the large side.
	allowed := int64(pacedPingBucket + controlBucket + (pacedPingRate+controlRate)*elapsed.Seconds() + 1)
	assert.LessOrEqual(t, acks.Load(), allowed, "PINGs answered in %s", elapsed)
}

// tlsPingRun serves one TLS connection on which the client has written
// the preface, SETTINGS and pings PINGs, each in a TLS record of its own,
// before the server reads any of them (so nothing depends on how the two
// sides are scheduled). It returns the PING acknowledgements the client
// read, the server's writes, the abuse reported, and how long the server
// served (an upper bound of the time its paced bucket drained).
func tlsPingRun(t *testing.T, pings int) (acks, writes int64, abuse string, served time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cert := testutil.NewAnchor(t, testutil.CertOptions{Name: "test anchor"}).Leaf(t, testutil.CertOptions{Name: "h2server.test"}).TLS
	abused := make(chan string, 1)
	handshaken := make(chan *tls.Conn, 1)
	written := make(chan struct{})
	done := make(chan int64, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(handshaken)
			return
		}
		tc := tls.Server(nc, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
		if tc.Handshake() != nil {
			tc.Close()
			close(handshaken)
			return
		}
		handshaken <- tc
		<-written
		wc := &testutil.WriteCounter{Conn: tc}
		ServeConn(context.Background(), wc, http.NotFoundHandler(), &Config{OnAbuse: func(r string) { abused <- r }})
		done <- wc.Writes.Load()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	defer c.Close()
	require.NotNil(t, <-handshaken, "the server's handshake failed")
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // hang guard only
	_, err = io.WriteString(c, clientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c) // each frame is one Write: one record
	require.NoError(t, fr.WriteSettings())
	for i := range pings {
		require.NoError(t, fr.WritePing(false, [8]byte{byte(i >> 8), byte(i)}))
	}
	start := time.Now()
	close(written)
	for acks < int64(pings) {
		f, err := fr.ReadFrame()
		if err != nil {
			break // the server ended the connection
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			acks++
		}
	}
	c.Close()
	writes = <-done
	served = time.Since(start)
	select {
	case abuse = <-abused:
	default:
	}
	return acks, writes, abuse, served
}

func TestAPingFloodOverTLSIsAnsweredInBatches(t *testing.T) {
	// Over TLS the server reads one PING per record and never sees the
	// next one buffered; it used to write each acknowledgement alone,
	// one TLS record and one write each (issue 27, finding 6: the
	// writes were what a flooder cost the victims). Once the client has
	// pinged ackHoldAfter times without DATA to earn it, the answers
	// wait for the next ones.
	const pings = 200 // within the paced bucket: answered, not ended
	acks, writes, abuse, _ := tlsPingRun(t, pings)
	t.Logf("%d PINGs, %d acknowledged in %d writes", pings, acks, writes)
	assert.Equal(t, int64(pings), acks, "every PING is answered")
	assert.Empty(t, abuse)
	// ackHoldAfter writes of one acknowledgement each, the SETTINGS
	// frames, then batches: one for the rest unless the server was kept
	// off the CPU for (2*time.Millisecond) between two records it had already
	// received. Half as many writes as PINGs leaves room for that.
	assert.Less(t, writes, int64(pings/2), "acknowledgements written in batches")
}

func TestHeldAcksCountAgainstThePacedBucket(t *testing.T) {
	// Held acknowledgements are the server's doing: PINGs that arrive
	// while they wait are paced ones, so a flood still ends at the paced
	// bucket (not at the control bucket's 1000), with its answers batched.
	const pings = 600
	acks, writes, abuse, served := tlsPingRun(t, pings)
	t.Logf("%d PINGs, %d acknowledged in %d writes in %s", pings, acks, writes, served)
	// Were held acknowledgements charged to the control bucket, 600
	// PINGs would all fit in it and the flood would not end: the abuse
	// report is what tells the two apart.
	assert.Equal(t, "http2-control-flood", abuse)
	assert.Less(t, acks, int64(pings), "the flood ended before every PING was answered")
	// A PING that arrives while the server is writing (not holding) an
	// acknowledgement is charged to the control bucket, which a busy
	// machine makes common (349 answered in one run beside stress-ng, 258
	// on an idle one). The buckets drain while the server works through
	// the flood: served bounds that time from above.
	allowed := int64(pacedPingBucket + controlBucket + (pacedPingRate+controlRate)*served.Seconds() + 1)
	assert.LessOrEqual(t, acks, allowed, "answered no more than the two buckets and what they drained in %s", served)
	assert.Less(t, writes, int64(pacedPingBucket/2))
}

func TestAClientWaitingForEachAckPastTheHoldIsAnswered(t *testing.T) {
	// A client that pings past ackHoldAfter and waits for each answer
	// has nothing more to send: its held acknowledgement must still go
	// out (after (2*time.Millisecond)), and the connection stays up.
	hs := startHostileServer(t, http.NotFoundHandler(), nil)
	c, err := net.Dial("tcp", hs.addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // hang guard only
	_, err = io.WriteString(c, clientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c)
	require.NoError(t, fr.WriteSettings())
	acks := make(chan struct{}, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				close(acks)
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acks <- struct{}{}
			}
		}
	}()
	for i := range 3 * ackHoldAfter {
		require.NoError(t, fr.WritePing(false, [8]byte{byte(i)}))
		_, ok := <-acks
		require.True(t, ok, "connection ended after %d PINGs", i)
	}
}
