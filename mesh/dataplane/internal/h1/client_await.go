package h1

import (
	"net"
	"syscall"
)

// Sending a request and waiting for its answer without a read that finds
// nothing.
//
// Go's network poller is edge-triggered, so a Read always tries the
// system call first and waits only when it finds nothing: right after a
// request goes out its answer cannot be there yet, and that first read is
// a system call spent for nothing on every exchange (read(2) returning
// EAGAIN; through TLS, a trip through the record layer too). On the
// machines the proxy runs on a system call is its largest cost per
// request.
//
// sendAndAwait avoids it by writing the request from inside the socket's
// RawConn.Read callback: the runtime forgets the socket's earlier
// readiness before the callback runs, the callback writes the request and
// reports "not yet", and the runtime waits for readiness from then on.
// Every byte of the answer arrives after the request was written, so its
// arrival is seen; the read that follows finds it at once.
//
// What could make the wait miss bytes is bytes that were already waiting
// before the request went out (a server talking out of turn, a close_notify
// or a FIN of a server that closed the idle connection). None of those is
// the answer: the wait then lasts until the answer or the server's close
// arrives (a write to a closed socket is answered with a reset, which ends
// the wait), and the read that follows reports them exactly as it would
// have. Deadlines and Close end the wait as they end a Read.
//
// The one case the wait holds longer than a read would: a server that
// only half-closes an idle connection (its FIN sent, its socket still
// reading) and reads the request without answering holds the wait until
// it closes, where a read would have found the end of the stream at once.
// Go's and Weft's servers close idle connections outright; and the proxy
// gives every Client a Reusable check, which finds such a close on a
// connection idle for more than a few milliseconds before reusing it.

// SocketOf returns the RawConn of the socket under c, found through the
// layers that say what they wrap (NetConn, as crypto/tls's Conn does), or
// nil when there is none to reach (an exchange on c then reads as usual).
// Layers may buffer what they read: see above why that cannot hold an
// answer back.
func SocketOf(c net.Conn) syscall.RawConn {
	for range 8 {
		if sc, ok := c.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		if c = u.NetConn(); c == nil {
			return nil
		}
	}
	return nil
}

// sendAndAwait flushes the request and returns once the connection has
// something to read (or failed, or its read deadline passed: the read
// that follows reports those). An error is the write's.
func (cc *clientConn) sendAndAwait() error {
	if cc.sock == nil || cc.br.Buffered() > 0 {
		return cc.bw.Flush()
	}
	if cc.awaitFn == nil {
		cc.awaitFn = cc.await // one closure per connection, not per request
	}
	cc.sent, cc.sendErr = false, nil
	_ = cc.sock.Read(cc.awaitFn)
	if !cc.sent {
		// The wait could not start (the connection is closed, or its
		// read deadline has passed): send as usual, and let the write or
		// the read that follows say what happened.
		return cc.bw.Flush()
	}
	err := cc.sendErr
	cc.sendErr = nil
	return err
}

// await is sendAndAwait's RawConn.Read callback: the first call sends,
// the next one (after the runtime saw the socket readable) ends the wait.
func (cc *clientConn) await(uintptr) bool {
	if cc.sent {
		return true
	}
	cc.sent = true
	cc.sendErr = cc.bw.Flush()
	return cc.sendErr != nil
}
