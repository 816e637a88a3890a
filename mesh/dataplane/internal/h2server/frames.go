package h2server

// The client's frames: what each one does to the connection and its
// streams (the read loop in server.go calls process for every frame).

import (
	"fmt"
	"time"

	"golang.org/x/net/http2"
)

// process handles one frame from the client; it runs on the read loop.
func (c *conn) process(f http2.Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.sawSettings {
		if _, ok := f.(*http2.SettingsFrame); !ok {
			c.count("first_settings")
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.sawSettings = true
	}
	if c.closing {
		return nil
	}
	c.accountLocked(f)
	if c.abuse != "" {
		return nil
	}
	if c.goAway && f.Header().StreamID > c.maxID {
		// Streams the client opened after our GOAWAY are ignored; their
		// data still counts against (and returns to) the connection
		// window, like all data.
		if d, ok := f.(*http2.DataFrame); ok {
			if int64(d.Length) > c.inflow {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			c.inflow -= int64(d.Length)
			c.returnConnLocked(int64(d.Length))
		}
		return nil
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.HeadersFrame:
		return c.processHeaders(&c.hr.Block)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		mark := len(c.out)
		_ = c.wf.WritePing(true, f.Data)
		c.controlDone(mark)
		c.ackQueued++
		return nil
	case *http2.RSTStreamFrame:
		if c.idleLocked(f.StreamID) {
			c.count("reset_idle_stream")
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.countResetLocked(f.StreamID)
		if s := c.streams[f.StreamID]; s != nil {
			s.abortLocked(fmt.Errorf("%w: reset by the client (%v)", errStreamClosed, f.ErrCode))
			c.removeLocked(s)
		}
		return nil
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			c.count("priority_self")
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
		return nil
	case *http2.GoAwayFrame:
		c.startGoAwayLocked(http2.ErrCodeNo)
		return nil
	case *http2.PushPromiseFrame:
		c.count("push_promise")
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil // unknown frame types are ignored
}

// idleLocked reports whether a stream ID was never used by the client.
func (c *conn) idleLocked(id uint32) bool {
	if id%2 == 1 {
		return id > c.maxID
	}
	return true // the server opens no streams
}

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.unacked--
		if c.unacked < 0 {
			c.count("ack_mystery")
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	if f.NumSettings() > 100 {
		c.count("settings_big")
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// Applied in order: a parameter repeated in one frame ends with its
	// last value (RFC 9113 section 6.5.3).
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSize(min(s.Val, headerTableSize))
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.initialWin
			c.initialWin = int64(s.Val)
			for _, st := range c.streams {
				st.sendWin += delta
				st.sendPeak += delta
				if st.sendWin > 1<<31-1 {
					c.count("setting_win_size")
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
				st.cond.Broadcast()
			}
		case http2.SettingMaxFrameSize:
			c.peerFrame = min(int(s.Val), maxWriteFrame)
		case http2.SettingNoRFC7540Priorities:
			if s.Val > 1 {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	mark := len(c.out)
	_ = c.wf.WriteSettingsAck()
	c.controlDone(mark)
	return nil
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		c.windowUpdateLocked(c.sendWin, int64(f.Increment), &c.sendPeak)
		c.sendWin += int64(f.Increment)
		if c.sendWin > 1<<31-1 {
			c.count("bad_flow")
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		for _, s := range c.streams {
			if s.waitingWin {
				s.cond.Broadcast()
			}
		}
		return nil
	}
	if c.idleLocked(f.StreamID) {
		c.count("stream_idle")
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	s := c.streams[f.StreamID]
	if s == nil {
		c.closedWindowUpdateLocked(int64(f.Increment))
		return nil
	}
	c.windowUpdateLocked(s.sendWin, int64(f.Increment), &s.sendPeak)
	s.sendWin += int64(f.Increment)
	if s.sendWin > 1<<31-1 {
		c.count("bad_flow")
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	s.cond.Broadcast()
	return nil
}

func (c *conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	if c.idleLocked(id) {
		c.count("data_on_idle")
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	length := int64(f.Length)
	if length > c.inflow {
		c.count("data_flow")
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.inflow -= length
	// The connection window is given back as bytes arrive, whether they
	// are buffered, dropped or refused: only a stream's own window holds
	// back a handler that does not read, so that its unread bytes never
	// take the connection window from the other streams (a peer proxy's
	// connection carries many clients' uploads). BufferLimit bounds what
	// all the streams hold.
	c.returnConnLocked(length)
	s := c.streams[id]
	if s == nil || s.remoteDone {
		c.count("closed")
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	if length > s.inflow {
		c.count("flow_on_data_length")
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	s.inflow -= length
	data := f.Data()
	s.received += int64(len(data))
	if s.declared >= 0 && s.received > s.declared {
		c.count("send_too_much")
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if pad := length - int64(len(data)); pad > 0 {
		s.returnLocked(pad)
	}
	if len(data) > 0 && !s.bodyClosed && !s.dropped {
		if len(s.buf) == s.off {
			// Bytes coming to an empty buffer count as a sign of life, as
			// a read does: the body to lose its bytes is the one whose
			// unread bytes have waited longest (as in h2client).
			c.readClock++
			s.lastRead = c.readClock
		}
		s.appendLocked(data)
		c.buffered += int64(len(data))
		s.cond.Broadcast()
		if c.buffered > c.cfg.BufferLimit {
			c.evictLocked()
			if c.streams[id] != s || s.dropped {
				return nil // this stream was the one to go
			}
		}
	}
	if f.StreamEnded() {
		return s.endRemoteLocked()
	}
	return nil
}

// returnConnLocked gives n received bytes back to the connection window,
// sending WINDOW_UPDATE once half the window is owed.
func (c *conn) returnConnLocked(n int64) {
	c.unsent += n
	if c.unsent >= int64(c.cfg.ConnectionWindow)/2 {
		n := uint32(c.unsent)
		mark := len(c.out)
		_ = c.wf.WriteWindowUpdate(0, n)
		c.controlDone(mark)
		c.inflow += c.unsent
		c.unsent = 0
	}
}

// resetLocked sends RST_STREAM and forgets the stream.
func (c *conn) resetLocked(id uint32, code http2.ErrCode) {
	if c.werr != nil {
		return
	}
	mark := len(c.out)
	_ = c.wf.WriteRSTStream(id, code)
	c.controlDone(mark)
	c.countResetLocked(id)
	if s := c.streams[id]; s != nil {
		s.abortLocked(fmt.Errorf("%w: reset (%v)", errStreamClosed, code))
		c.removeLocked(s)
	}
}

// removeLocked forgets a stream that is closed both ways (or reset),
// dropping its unread body bytes.
func (c *conn) removeLocked(s *stream) {
	if c.streams[s.id] != s {
		return
	}
	delete(c.streams, s.id)
	c.closedLocked(s)
	s.dropBufLocked()
	if len(c.streams) == 0 {
		c.idleSince = time.Now()
		if cap(c.spare) > 16<<10 {
			c.spare = nil // an idle connection keeps no large buffer
		}
	}
	c.maybeCloseLocked()
}
