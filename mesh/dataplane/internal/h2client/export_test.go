package h2client

import "io"

// BodyBuffer reports the unread bytes and the capacity of the buffer
// behind a response body of this package.
func BodyBuffer(b io.Reader) (unread, capacity int) {
	cs := b.(*body).cs
	cs.cc.mu.Lock()
	defer cs.cc.mu.Unlock()
	return len(cs.buf) - cs.off, cap(cs.buf)
}

// Buffered reports the unread response bytes the connection holds.
func Buffered(cc *Conn) int64 {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.buffered
}
