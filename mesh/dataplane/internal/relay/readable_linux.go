package relay

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekReady is the RawConn.Read callback of a plaintext copy: it waits
// until a socket has bytes (or EOF, or an error) without consuming them: a
// one-byte MSG_PEEK that would block reports "not yet" and the runtime
// poller waits. A pending socket error (a reset) is reported by the peek
// once and cleared, so it is kept in *errno for the copy to return: the
// read that follows would only see the end of the stream.
func peekReady(fd uintptr, errno *syscall.Errno) bool {
	var b [1]byte
	_, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	*errno = e
	return true
}

// PeekIdle is the RawConn.Read callback that tells, without waiting or
// consuming anything, what an idle socket holds: nothing yet (IdleOpen),
// the end of the stream or an error (IdleClosed), or bytes (IdleBytes).
func PeekIdle(fd uintptr) IdleState {
	var b [1]byte
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	switch {
	case errno == unix.EAGAIN || errno == unix.EINTR:
		return IdleOpen
	case errno != 0 || n == 0:
		return IdleClosed
	}
	return IdleBytes
}
