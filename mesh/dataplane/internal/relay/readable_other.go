//go:build !linux

package relay

import "syscall"

// peekReady reports a socket as ready at once where peeking is not
// implemented; the copy then blocks in Read with its buffer.
func peekReady(uintptr, *syscall.Errno) bool { return true }

// PeekIdle reports an idle socket as open where peeking is not
// implemented: a closed one is then found by the request sent on it.
func PeekIdle(uintptr) IdleState { return IdleOpen }
