package dataplane

import (
	"errors"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// h2Guard watches the frames of a server-side HTTP/2 connection as they
// pass (it only reads frame headers, nine bytes each, and never buffers
// payloads) and closes the connection when the client abuses it:
//
//   - premature stream resets: RST_STREAM frames the client sends and the
//     server sends (MadeYouReset makes the server reset streams through
//     malformed frames) for streams opened less than a second before
//     count in one budget; past the reset budget, a connection on which
//     at least half of the streams were reset prematurely is closed
//     (rapid reset, CVE-2023-44487). Cancelling long-lived streams (gRPC
//     watches) does not count;
//   - control floods: SETTINGS, PING and PRIORITY frames beyond a leaky
//     bucket of 1000 frames draining at 1000 per second. A PING sent
//     while none of the client's earlier PINGs is unanswered does not
//     count: a client that waits for each acknowledgement (grpc-go's
//     bandwidth estimator pings once per round trip, thousands of times
//     a second on a fast link) is paced by the server's answers, while
//     a flood sends PINGs faster than they are answered;
//   - empty frames: DATA without END_STREAM, HEADERS and CONTINUATION
//     frames with no payload beyond a bucket of 100 draining at 10 per
//     second;
//   - CONTINUATION floods: more than 64 CONTINUATION frames in one header
//     block (the server, internal/h2server, also bounds the header
//     bytes);
//   - connection-specific header fields (Connection, Keep-Alive,
//     Proxy-Connection, Transfer-Encoding, Upgrade, TE other than
//     "trailers"), which make a request malformed (RFC 9113 section
//     8.2.2): the guard decodes header blocks with its own HPACK decoder
//     and ends the connection, where the server alone would only reset
//     the stream.
//
// The server (internal/h2server) already bounds streams and running
// handlers per connection, queued output (its answers to control frames
// included), HPACK table and header list sizes, and answers flow-control
// violations with FLOW_CONTROL_ERROR; the guard adds what it does not
// count per connection.
type h2Guard struct {
	net.Conn
	budget  int
	onAbuse func(reason string)

	mu       sync.Mutex
	rd       frameScanner
	wr       frameScanner
	resets   int // premature resets
	streams  int
	maxID    uint32
	recent   [256]openedStream // the latest streams, for "premature"
	next     int
	control  bucket
	empty    bucket
	contRun  int
	pingsOut int // the client's PINGs not yet acknowledged
	abuse    string
	reported bool

	// Header block decoding.
	dec    *hpack.Decoder
	hdr    headerFrame
	decBad bool
}

// openedStream is when a stream was opened.
type openedStream struct {
	id uint32
	at time.Time
}

// prematureWindow is how young a stream must be for its reset to count.
const prematureWindow = time.Second

// headerFrame tracks the HEADERS or CONTINUATION frame whose payload is
// being read.
type headerFrame struct {
	active     bool
	typ, flags byte
	length     int
	off        int
	fragStart  int
	fragEnd    int // -1 until the pad length is known
}

var errH2Abuse = errors.New("dataplane: HTTP/2 connection closed for abuse")

func newH2Guard(c net.Conn, resetBudget, maxHeaderBytes int, onAbuse func(string)) *h2Guard {
	g := &h2Guard{
		Conn:    c,
		budget:  resetBudget,
		onAbuse: onAbuse,
		control: bucket{capacity: 1000, rate: 1000},
		empty:   bucket{capacity: 100, rate: 10},
	}
	g.dec = hpack.NewDecoder(4096, g.field)
	g.dec.SetMaxStringLength(maxHeaderBytes)
	g.rd.preface = len(h2ClientPreface)
	return g
}

// field checks one decoded request header field; g.mu is held.
func (g *h2Guard) field(f hpack.HeaderField) {
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		g.abuse = "http2-connection-header"
	case "te":
		if f.Value != "trailers" {
			g.abuse = "http2-connection-header"
		}
	}
}

// payload feeds header block fragments to the decoder; g.mu is held.
func (g *h2Guard) payload(b []byte) {
	h := &g.hdr
	if !h.active || g.decBad {
		return
	}
	for len(b) > 0 {
		if h.fragEnd < 0 {
			// The first byte of a padded HEADERS frame is the pad length.
			pad := int(b[0])
			h.fragEnd = h.length - pad
			h.off++
			b = b[1:]
			if h.fragEnd < h.fragStart {
				g.decBad = true
				return
			}
			continue
		}
		lo, hi := h.off, h.off+len(b)
		from, to := max(lo, h.fragStart), min(hi, h.fragEnd)
		if from < to {
			if _, err := g.dec.Write(b[from-lo : to-lo]); err != nil {
				g.decBad = true // the server sees the same error
				return
			}
		}
		h.off = hi
		b = nil
	}
}

const h2ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the guard looks at.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1 // SETTINGS and PING
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

func (g *h2Guard) Read(p []byte) (int, error) {
	g.mu.Lock()
	abused := g.abuse != ""
	g.mu.Unlock()
	if abused {
		g.report()
		return 0, errH2Abuse
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		g.mu.Lock()
		g.rd.scanPayload(p[:n], g.clientFrame, g.payload, g.frameEnd)
		abused = g.abuse != ""
		g.mu.Unlock()
		if abused {
			g.report()
			g.Conn.Close()
			return 0, errH2Abuse
		}
	}
	return n, err
}

func (g *h2Guard) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.wr.scan(p, g.serverFrame)
	abused := g.abuse != ""
	g.mu.Unlock()
	if abused {
		// The frames being written still go out (a GOAWAY among them);
		// the next read ends the connection.
		defer func() { _ = g.Conn.SetReadDeadline(aLongTimeAgo) }()
	}
	return g.Conn.Write(p)
}

func (g *h2Guard) report() {
	g.mu.Lock()
	reason, first := g.abuse, !g.reported
	g.reported = true
	g.mu.Unlock()
	if first && g.onAbuse != nil {
		g.onAbuse(reason)
	}
}

// frameEnd is called when a client frame's payload has been read; g.mu
// is held.
func (g *h2Guard) frameEnd() {
	h := &g.hdr
	if h.active && h.flags&flagEndHeaders != 0 && !g.decBad {
		if err := g.dec.Close(); err != nil {
			g.decBad = true
		}
	}
	h.active = false
}

// clientFrame inspects a frame header from the client; g.mu is held.
func (g *h2Guard) clientFrame(typ, flags byte, length int, stream uint32) {
	now := time.Now()
	if typ == frameHeaders || typ == frameContinuation {
		start, end := 0, length
		if typ == frameHeaders {
			if flags&flagPadded != 0 {
				start, end = 1, -1
			}
			if flags&flagPriority != 0 {
				start += 5
			}
		}
		g.hdr = headerFrame{active: true, typ: typ, flags: flags, length: length, fragStart: start, fragEnd: end}
		if end < 0 {
			// fragStart counts the pad length byte, read separately.
			g.hdr.fragStart = start
		}
	}
	if typ != frameContinuation {
		g.contRun = 0
	}
	switch typ {
	case frameHeaders:
		if stream > g.maxID && stream%2 == 1 {
			g.maxID = stream
			g.streams++
			g.recent[g.next] = openedStream{id: stream, at: now}
			g.next = (g.next + 1) % len(g.recent)
		}
		if length == 0 && flags&flagEndHeaders == 0 && !g.empty.take(now) {
			g.abuse = "http2-empty-frames"
		}
	case frameContinuation:
		g.contRun++
		if g.contRun > 64 {
			g.abuse = "http2-continuation-flood"
		}
		if length == 0 && !g.empty.take(now) {
			g.abuse = "http2-empty-frames"
		}
	case frameData:
		if length == 0 && flags&flagEndStream == 0 && !g.empty.take(now) {
			g.abuse = "http2-empty-frames"
		}
	case frameRSTStream:
		g.countReset(stream, now)
	case framePing:
		if flags&flagAck != 0 {
			if !g.control.take(now) {
				g.abuse = "http2-control-flood"
			}
			break
		}
		if g.pingsOut > 0 && !g.control.take(now) {
			g.abuse = "http2-control-flood"
		}
		g.pingsOut++
	case frameSettings, framePriority:
		if !g.control.take(now) {
			g.abuse = "http2-control-flood"
		}
	}
}

// serverFrame inspects a frame header the server writes; g.mu is held.
func (g *h2Guard) serverFrame(typ, flags byte, _ int, stream uint32) {
	switch {
	case typ == frameRSTStream:
		g.countReset(stream, time.Now())
	case typ == framePing && flags&flagAck != 0 && g.pingsOut > 0:
		g.pingsOut--
	}
}

// countReset counts the reset of a stream opened within the premature
// window; g.mu is held.
func (g *h2Guard) countReset(stream uint32, now time.Time) {
	premature := false
	for _, o := range g.recent {
		if o.id == stream && o.id != 0 {
			premature = now.Sub(o.at) < prematureWindow
			break
		}
	}
	if !premature {
		return
	}
	g.resets++
	if g.resets > g.budget && g.resets*2 >= g.streams {
		g.abuse = "http2-rapid-reset"
	}
}

// frameScanner follows frame boundaries in a byte stream.
type frameScanner struct {
	preface int     // bytes of client preface still to skip
	hdr     [9]byte // partial frame header
	have    int
	skip    int // payload bytes still to skip
}

func (s *frameScanner) scan(p []byte, frame func(typ, flags byte, length int, stream uint32)) {
	s.scanPayload(p, frame, nil, nil)
}

// scanPayload is scan that also hands payload bytes to payload and calls
// end after each frame's payload.
func (s *frameScanner) scanPayload(p []byte, frame func(typ, flags byte, length int, stream uint32), payload func([]byte), end func()) {
	for len(p) > 0 {
		if s.preface > 0 {
			n := min(s.preface, len(p))
			s.preface -= n
			p = p[n:]
			continue
		}
		if s.skip > 0 {
			n := min(s.skip, len(p))
			if payload != nil {
				payload(p[:n])
			}
			s.skip -= n
			p = p[n:]
			if s.skip == 0 && end != nil {
				end()
			}
			continue
		}
		n := copy(s.hdr[s.have:], p)
		s.have += n
		p = p[n:]
		if s.have < len(s.hdr) {
			return
		}
		s.have = 0
		length := int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		stream := (uint32(s.hdr[5])<<24 | uint32(s.hdr[6])<<16 | uint32(s.hdr[7])<<8 | uint32(s.hdr[8])) & 0x7fffffff
		frame(s.hdr[3], s.hdr[4], length, stream)
		s.skip = length
		if length == 0 && end != nil {
			end()
		}
	}
}

// bucket is a leaky bucket: take fails when capacity frames arrived
// faster than rate per second drains them.
type bucket struct {
	capacity float64
	rate     float64
	level    float64
	last     time.Time
}

func (b *bucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.level -= now.Sub(b.last).Seconds() * b.rate
		if b.level < 0 {
			b.level = 0
		}
	}
	b.last = now
	if b.level+1 > b.capacity {
		return false
	}
	b.level++
	return true
}
