package relay

// IdleState is what an idle connection's socket holds (PeekIdle).
type IdleState uint8

// The states of an idle socket.
const (
	IdleOpen   IdleState = iota // nothing to read
	IdleClosed                  // the end of the stream, or an error
	IdleBytes                   // bytes to read
)
