// Package relay is the proxy's L4 relay: it copies the bytes of an
// opaque (TCP or TLS) connection in both directions, and parks a
// direction that has nothing to do so that an idle connection costs
// neither a goroutine nor a buffer.
//
// What it owns:
//
//   - Pipe (pipe.go): the two directions of one relayed connection. A
//     direction copies on its own goroutine while bytes flow; from a
//     plaintext TCP source it waits for readability with a zero-copy peek
//     and takes a pooled buffer only for a burst; from a TLS source it
//     waits in a one-byte read. After a quiet period it registers its
//     source socket in the Poller and its goroutine exits. A clean end of
//     one side half-closes the other; an error closes both.
//   - Poller (poller_linux.go): one epoll set and one goroutine for the
//     whole proxy, resuming parked directions when their sockets become
//     readable. Elsewhere than Linux nothing parks.
//   - The 32 KiB copy buffers (copy.go), shared with the proxy's other
//     copies, and the socket peeks (readable_*.go) the proxy's idle HTTP/1
//     pool uses too (PeekIdle).
//
// What it trusts: the connections it is given (accepted and dialled by
// the proxy, already authorized) and the counters and Stats it is given.
// It reads nothing from the bytes it relays. Descriptors are touched only
// inside RawConn.Control, and the epoll data is a token, never a
// descriptor number, so a socket closed and its number reused can never
// receive another's events.
//
// It imports nothing of the dataplane package: the proxy wraps a Pipe
// with its drain tracking (the tracked connections) and its transport
// metrics (Counter and Stats are its series).
package relay
