package h2client

// wbuf collects frames: the framer writes each frame with one Write.
type wbuf struct{ b []byte }

func (w *wbuf) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// maxKeptBuffer is the largest write buffer kept for reuse after a flush.
const maxKeptBuffer = 32 << 10

// lockWrite takes the write lock for a goroutine about to queue frames,
// first waiting while the buffer is full and a flush is in progress (so
// that a server that does not read cannot make the buffer grow without
// bound). It returns the write error once the connection failed.
func (cc *Conn) lockWrite() error {
	cc.wmu.Lock()
	for len(cc.wb.b) >= maxWriteBuffer && cc.flushing && cc.werr == nil {
		cc.wcond.Wait()
	}
	if cc.werr != nil {
		err := cc.werr
		cc.wmu.Unlock()
		return err
	}
	return nil
}

// flushLocked is called with wmu held, after queueing frames, and
// releases it. When another goroutine is flushing it returns at once: that
// flusher writes what was queued meanwhile before it stops (group
// commit). Otherwise this goroutine becomes the flusher and writes until
// the buffer is empty; frames never wait for more to come.
func (cc *Conn) flushLocked() {
	if cc.flushing || len(cc.wb.b) == 0 {
		cc.wmu.Unlock()
		return
	}
	cc.flushing = true
	var err error
	for len(cc.wb.b) > 0 && cc.werr == nil {
		out := cc.wb.b
		cc.wb.b = cc.spare[:0]
		cc.spare = nil
		cc.wmu.Unlock()
		_, err = cc.conn.Write(out)
		cc.wmu.Lock()
		if cap(out) <= maxKeptBuffer {
			cc.spare = out[:0]
		}
		if err != nil {
			cc.werr = err
		}
		cc.wcond.Broadcast()
	}
	if cc.werr != nil {
		cc.wb.b = cc.wb.b[:0]
	}
	cc.flushing = false
	werr := cc.werr
	cc.wmu.Unlock()
	if err != nil && werr == err {
		cc.shut(err)
	}
}

// flushSyncLocked is flushLocked for a goroutine that must know its
// frames reached the socket (a GOAWAY before closing): it waits for a
// flush in progress to end, then flushes itself.
func (cc *Conn) flushSyncLocked() {
	for cc.flushing && cc.werr == nil {
		cc.wcond.Wait()
	}
	cc.flushLocked()
}

// writeControl queues frames written by fn and flushes them, for the read
// loop and timers.
func (cc *Conn) writeControl(fn func() error) error {
	if err := cc.lockWrite(); err != nil {
		return err
	}
	err := fn()
	cc.flushLocked()
	return err
}
