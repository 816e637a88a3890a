//go:build !linux

package dataplane

// readable reports a socket as ready at once where peeking is not
// implemented; the copy then blocks in Read with its buffer.
func readable(uintptr) bool { return true }

// peekIdle reports an idle socket as open where peeking is not
// implemented: a closed one is then found by the request sent on it.
func peekIdle(uintptr) peerIdleState { return peerOpen }
