package httpcore

import "net/netip"

// Conn is what the proxy knows of the connection a request came on that
// both directions read.
type Conn struct {
	H2         bool           // the client speaks HTTP/2 on this connection
	Remote     netip.AddrPort // the client's address
	TargetAddr netip.AddrPort // inbound: the pod address and application port; outbound: the original destination, when known
}

// DialError marks a failure to connect (a pooled connection, or one of
// its own): the request was not sent.
type DialError struct{ Err error }

func (e *DialError) Error() string { return e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }
