// Package bodybuf holds the one rule by which the proxy's HTTP/2 server
// (request bodies) and client (response bodies) buffer a stream's
// received bytes until its reader takes them.
//
// Flow control keeps a stream's unread bytes within its receive window.
// Append keeps the buffer within twice that window: the unread bytes are
// moved to the front only when at least as many bytes were read before
// them (so each byte is moved once at most, on average), and otherwise
// the buffer grows, doubling up to twice the window. Once there it never
// needs to grow again: a buffer that full has more bytes read than
// unread. (Without the move, a reader always a byte behind kept every
// byte of the body: issue 27.)
package bodybuf

// Append adds data to buf, whose bytes before off were read already,
// and returns the new buffer and offset. window is the stream's receive
// window, which bounds the unread bytes.
func Append(buf []byte, off int, data []byte, window int) ([]byte, int) {
	if off == len(buf) {
		buf, off = buf[:0], 0
	}
	if len(buf)+len(data) <= cap(buf) {
		return append(buf, data...), off
	}
	unread := len(buf) - off
	if off >= unread {
		n := copy(buf, buf[off:])
		buf, off = buf[:n], 0
	}
	if need := unread + len(data); off > 0 || need > cap(buf) {
		size := max(min(2*cap(buf), 2*window), need)
		nb := make([]byte, unread, size)
		copy(nb, buf[off:])
		buf, off = nb, 0
	}
	return append(buf, data...), off
}
