//go:build !linux

package relay

import (
	"errors"
	"syscall"
)

// Poller parks idle copy directions on Linux only; elsewhere every
// direction keeps its goroutine (see flow).
type Poller struct{}

// NewPoller fails: there is no idle poller here.
func NewPoller() (*Poller, error) {
	return nil, errors.New("relay: idle poller: only on Linux")
}

func (*Poller) register(*flow) (uint64, bool)      { return 0, false }
func (*Poller) unregister(syscall.RawConn, uint64) {}

// Parked is always 0: nothing parks here.
func (*Poller) Parked() int { return 0 }

// Stop does nothing.
func (*Poller) Stop() {}
