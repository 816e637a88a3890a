//go:build !linux

package dataplane

import (
	"errors"
	"syscall"
)

// idlePoller parks idle copy directions on Linux only; elsewhere every
// direction keeps its goroutine (see flow).
type idlePoller struct{}

func newIdlePoller() (*idlePoller, error) {
	return nil, errors.New("dataplane: idle poller: only on Linux")
}

func (*idlePoller) register(*flow) (uint64, bool)      { return 0, false }
func (*idlePoller) unregister(syscall.RawConn, uint64) {}
func (*idlePoller) parkedCount() int                   { return 0 }
func (*idlePoller) stop()                              {}
