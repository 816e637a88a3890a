package h2client

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/mesh/dataplane/internal/bodybuf"
)

// readLoop reads the server's frames until the connection fails, then
// ends every stream.
func (cc *Conn) readLoop() {
	defer close(cc.done)
	err := cc.readFrames()
	cc.shut(err)
	if cc.keepalive != nil {
		cc.keepalive.Stop()
	}
	if cc.idleTimer != nil {
		cc.idleTimer.Stop()
	}
	cc.mu.Lock()
	cc.closed = true
	cc.closing = true
	cause := cc.connErr
	var bodies []*stream
	for id, cs := range cc.streams {
		if cc.gotGoAway && id > cc.goAwayLast {
			cc.endStreamLocked(cs, fmt.Errorf("h2client: server went away before the stream: %w", ErrUnprocessed))
		} else {
			cc.endStreamLocked(cs, fmt.Errorf("h2client: connection lost: %w", cause))
		}
		bodies = append(bodies, cs)
	}
	cc.cond.Broadcast()
	cc.mu.Unlock()
	for _, cs := range bodies {
		cs.closeReqBody()
	}
	cc.wmu.Lock()
	if cc.werr == nil {
		cc.werr = errors.New("h2client: connection closed")
	}
	cc.wcond.Broadcast()
	cc.wmu.Unlock()
}

// endStreamLocked ends a stream without writing anything: its reader gets
// err unless the response was complete.
func (cc *Conn) endStreamLocked(cs *stream, err error) {
	if !cs.recvEnded && cs.rerr == nil {
		cs.rerr = err
	}
	cs.reset = true
	cc.removeLocked(cs)
	cs.cond.Broadcast()
}

func (cc *Conn) readFrames() error {
	for {
		f, err := cc.hr.ReadFrame()
		cc.framesRead.Add(1)
		if err != nil {
			var se http2.StreamError
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &se):
				cc.streamError(se.StreamID, se.Code, "stream_"+codeClass(se.Code), fmt.Errorf("h2client: malformed response: %w", se))
				continue
			case errors.As(err, &ce):
				return cc.connError(http2.ErrCode(ce), "conn_"+codeClass(http2.ErrCode(ce)), err.Error())
			case errors.Is(err, http2.ErrFrameTooLarge):
				return cc.connError(http2.ErrCodeFrameSize, "frame_too_large", err.Error())
			}
			return fmt.Errorf("h2client: reading: %w", err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			err = cc.onData(f)
		case *http2.HeadersFrame:
			err = cc.onHeaders(&cc.hr.Block)
		case *http2.RSTStreamFrame:
			err = cc.onReset(f)
		case *http2.SettingsFrame:
			err = cc.onSettings(f)
		case *http2.WindowUpdateFrame:
			err = cc.onWindowUpdate(f)
		case *http2.PingFrame:
			err = cc.onPing(f)
		case *http2.GoAwayFrame:
			cc.onGoAway(f)
		case *http2.PushPromiseFrame:
			return cc.connError(http2.ErrCodeProtocol, "push_promise", "PUSH_PROMISE though push is disabled")
		}
		if err != nil {
			return err
		}
	}
}

// codeClass is an error code as a short lower-case word.
func codeClass(c http2.ErrCode) string {
	if c > http2.ErrCodeHTTP11Required {
		return "unknown"
	}
	return strings.ToLower(strings.TrimSuffix(c.String(), "_ERROR"))
}

// lookup returns the open stream id, or nil; for an id we never opened
// (idle, or server-initiated) it reports a protocol violation.
func (cc *Conn) lookup(id uint32) (*stream, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cs := cc.streams[id]
	return cs, cs == nil && (id%2 == 0 || id >= cc.nextID)
}

// streamError resets stream id for a fault of the server's.
func (cc *Conn) streamError(id uint32, code http2.ErrCode, class string, err error) {
	cc.countError(class)
	cs, _ := cc.lookup(id)
	if cs != nil {
		cc.failStream(cs, err, code)
		return
	}
	_ = cc.writeControl(func() error { return cc.fr.WriteRSTStream(id, code) })
}

func (cc *Conn) onData(f *http2.DataFrame) error {
	id := f.StreamID
	size := int64(f.Length)
	cc.mu.Lock()
	if size > cc.inflow {
		cc.mu.Unlock()
		return cc.connError(http2.ErrCodeFlowControl, "conn_flow_overflow", "DATA beyond the connection window")
	}
	// Connection credit is owed as soon as the bytes are received,
	// whether they are buffered, dropped or refused: only the stream
	// window holds back a stream whose reader is slow, so that its unread
	// bytes never take the connection window from the other streams.
	cc.inflow -= size
	cc.connUnacked += size
	due := cc.connUnacked >= int64(cc.cfg.connWindow)/2
	cs := cc.streams[id]
	switch {
	case cs == nil:
		idle := id%2 == 0 || id >= cc.nextID
		cc.mu.Unlock()
		if idle {
			return cc.connError(http2.ErrCodeProtocol, "data_idle_stream", "DATA on a stream never opened")
		}
		if due {
			cc.returnCredit()
		}
		return nil
	case cs.resp == nil, cs.recvEnded, size > cs.inflow:
		cc.mu.Unlock()
		switch {
		case cs.resp == nil:
			cc.streamError(id, http2.ErrCodeProtocol, "data_before_headers", errors.New("h2client: DATA before the response headers"))
		case size > cs.inflow:
			cc.streamError(id, http2.ErrCodeFlowControl, "stream_flow_overflow", errors.New("h2client: DATA beyond the stream window"))
		default:
			cc.streamError(id, http2.ErrCodeStreamClosed, "data_after_end", errors.New("h2client: DATA after the end of the stream"))
		}
		if due {
			cc.returnCredit()
		}
		return nil
	}
	cs.inflow -= size
	data := f.Data()
	if pad := size - int64(len(data)); pad > 0 {
		cs.unacked += pad
	}
	var gone []*stream
	if !cs.bodyDone && !cs.dropped && len(data) > 0 {
		cs.appendLocked(data)
		cc.buffered += int64(len(data))
		cc.holdLocked(cs)
		if cc.buffered > cc.cfg.bufferLimit {
			gone = cc.evictLocked()
		}
	}
	if f.StreamEnded() {
		cs.recvEnded = true
		cc.maybeRemoveLocked(cs)
	}
	cs.cond.Broadcast()
	cc.mu.Unlock()
	for _, v := range gone {
		cc.failStream(v, v.rerr, http2.ErrCodeCancel)
	}
	if due {
		cc.returnCredit()
	}
	return nil
}

// appendLocked buffers received body bytes, within twice the stream
// window (bodybuf.Append).
func (cs *stream) appendLocked(data []byte) {
	cs.buf, cs.off = bodybuf.Append(cs.buf, cs.off, data, int(cs.cc.cfg.streamWindow))
}

func (cc *Conn) onReset(f *http2.RSTStreamFrame) error {
	cs, idle := cc.lookup(f.StreamID)
	if idle {
		return cc.connError(http2.ErrCodeProtocol, "rst_idle_stream", "RST_STREAM on a stream never opened")
	}
	if cs == nil {
		return nil
	}
	cc.mu.Lock()
	if f.ErrCode == http2.ErrCodeNo && cs.recvEnded {
		// The response is complete; the server wants no more body.
		cs.reset = true
		cc.removeLocked(cs)
		cc.mu.Unlock()
		cs.closeReqBody()
		return nil
	}
	se := http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode}
	var err error
	if f.ErrCode == http2.ErrCodeRefusedStream {
		err = fmt.Errorf("h2client: stream refused: %w: %w", se, ErrUnprocessed)
	} else {
		err = fmt.Errorf("h2client: stream reset by the server: %w", se)
	}
	cc.endStreamLocked(cs, err)
	cc.mu.Unlock()
	cs.closeReqBody()
	return nil
}

func (cc *Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }); err != nil {
		var ce http2.ConnectionError
		code := http2.ErrCodeProtocol
		if errors.As(err, &ce) {
			code = http2.ErrCode(ce)
		}
		return cc.connError(code, "bad_settings", err.Error())
	}
	tableSize := uint32(math.MaxUint32)
	var overflow bool
	cc.mu.Lock()
	if !cc.seenSettings {
		cc.seenSettings = true
		cc.maxStreams = maxStreamsCap // unless the settings say otherwise
	}
	_ = f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxFrameSize:
			cc.peerMaxFrame = s.Val
		case http2.SettingMaxConcurrentStreams:
			cc.maxStreams = int(min(s.Val, maxStreamsCap))
		case http2.SettingMaxHeaderListSize:
			cc.peerMaxHeader = s.Val
		case http2.SettingHeaderTableSize:
			tableSize = s.Val
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - int64(cc.peerInitWin)
			for _, cs := range cc.streams {
				cs.sendWin += delta
				if cs.sendWin > math.MaxInt32 {
					overflow = true
				}
			}
			cc.peerInitWin = int32(s.Val)
		}
		return nil
	})
	cc.cond.Broadcast()
	cc.mu.Unlock()
	if overflow {
		return cc.connError(http2.ErrCodeFlowControl, "settings_window_overflow", "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window")
	}
	return cc.writeControl(func() error {
		if tableSize != math.MaxUint32 {
			cc.henc.SetMaxDynamicTableSizeLimit(min(tableSize, 4096))
		}
		return cc.fr.WriteSettingsAck()
	})
}

func (cc *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	cc.mu.Lock()
	if f.StreamID == 0 {
		cc.sendWin += int64(f.Increment)
		over := cc.sendWin > math.MaxInt32
		cc.cond.Broadcast()
		cc.mu.Unlock()
		if over {
			return cc.connError(http2.ErrCodeFlowControl, "conn_window_overflow", "WINDOW_UPDATE overflows the connection window")
		}
		return nil
	}
	cs := cc.streams[f.StreamID]
	if cs == nil {
		idle := f.StreamID%2 == 0 || f.StreamID >= cc.nextID
		cc.mu.Unlock()
		if idle {
			return cc.connError(http2.ErrCodeProtocol, "window_idle_stream", "WINDOW_UPDATE on a stream never opened")
		}
		return nil
	}
	cs.sendWin += int64(f.Increment)
	over := cs.sendWin > math.MaxInt32
	cc.cond.Broadcast()
	cc.mu.Unlock()
	if over {
		cc.streamError(f.StreamID, http2.ErrCodeFlowControl, "stream_window_overflow", errors.New("h2client: WINDOW_UPDATE overflows the stream window"))
	}
	return nil
}

func (cc *Conn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		cc.mu.Lock()
		if cc.pingOut && f.Data == cc.pingData {
			cc.pingOut = false
		}
		cc.mu.Unlock()
		return nil
	}
	data := f.Data
	return cc.writeControl(func() error { return cc.fr.WritePing(true, data) })
}

func (cc *Conn) onGoAway(f *http2.GoAwayFrame) {
	cc.mu.Lock()
	if !cc.gotGoAway || f.LastStreamID < cc.goAwayLast {
		cc.goAwayLast = f.LastStreamID
	}
	cc.gotGoAway = true
	cc.closing = true
	if f.ErrCode != http2.ErrCodeNo {
		cc.countError("goaway_" + codeClass(f.ErrCode))
	}
	var gone []*stream
	for id, cs := range cc.streams {
		if id > cc.goAwayLast {
			cc.endStreamLocked(cs, fmt.Errorf("h2client: server going away (GOAWAY %s) before the stream: %w", f.ErrCode, ErrUnprocessed))
			gone = append(gone, cs)
		}
	}
	cc.becameIdleLocked()
	cc.cond.Broadcast()
	cc.mu.Unlock()
	for _, cs := range gone {
		cs.closeReqBody()
	}
}

// returnCredit sends a connection WINDOW_UPDATE once half the connection
// window was received.
func (cc *Conn) returnCredit() {
	cc.mu.Lock()
	inc := cc.connUnacked
	if inc < int64(cc.cfg.connWindow)/2 || cc.closed {
		cc.mu.Unlock()
		return
	}
	cc.connUnacked = 0
	cc.inflow += inc
	cc.mu.Unlock()
	_ = cc.writeControl(func() error { return cc.fr.WriteWindowUpdate(0, uint32(inc)) })
}
