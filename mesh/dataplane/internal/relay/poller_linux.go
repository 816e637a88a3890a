package relay

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Poller is the proxy's own epoll set for idle copy directions (see
// flow): a direction with nothing to do registers its source socket here,
// one-shot, and its goroutine exits; when the socket becomes readable (bytes,
// EOF, an error, a hang-up) the poller starts a goroutine that resumes the
// copy. One goroutine blocks in epoll_wait for the whole proxy.
//
// The epoll user data is a token, never the descriptor: descriptor numbers
// are reused as soon as a socket closes, and an event may be queued for a
// registration cancelled meanwhile. Descriptors are only touched inside
// RawConn.Control, which keeps the socket open for the call and fails once
// it is closed, so a stale registration can never reach a reused number.
type Poller struct {
	epfd   int
	wakefd int // eventfd: written once by stop
	done   chan struct{}

	mu      sync.Mutex // held across every epoll_ctl, so stop can close epfd
	stopped bool
	next    uint64           // last token given; 0 is the eventfd's
	parked  map[uint64]*flow // token -> parked direction
	woken   uint64           // directions resumed by an event, for tests
}

// idleEvents is how many readiness events one epoll_wait returns at most.
const idleEvents = 64

// NewPoller creates the epoll set and starts its goroutine.
func NewPoller() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("relay: idle poller: epoll_create1: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("relay: idle poller: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN} // token 0
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(wakefd)
		unix.Close(epfd)
		return nil, fmt.Errorf("relay: idle poller: epoll_ctl: %w", err)
	}
	ip := &Poller{epfd: epfd, wakefd: wakefd, done: make(chan struct{}), parked: make(map[uint64]*flow)}
	go ip.loop()
	return ip, nil
}

func eventToken(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

func (ip *Poller) loop() {
	defer close(ip.done)
	events := make([]unix.EpollEvent, idleEvents)
	for {
		n, err := unix.EpollWait(ip.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return // stop wakes whatever is still parked
		}
		for i := range events[:n] {
			tok := eventToken(&events[i])
			if tok == 0 {
				return
			}
			ip.fire(tok)
		}
	}
}

// fire resumes the direction parked under tok, unless it was cancelled.
func (ip *Poller) fire(tok uint64) {
	ip.mu.Lock()
	f := ip.parked[tok]
	if f != nil {
		delete(ip.parked, tok)
		_ = ip.ctlLocked(f.raw, unix.EPOLL_CTL_DEL, 0)
		ip.woken++
	}
	ip.mu.Unlock()
	if f != nil {
		f.wake(tok)
	}
}

// ctlLocked runs epoll_ctl on rc's descriptor while the socket is held open.
func (ip *Poller) ctlLocked(rc syscall.RawConn, op int, tok uint64) error {
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
		Fd:     int32(uint32(tok)),
		Pad:    int32(uint32(tok >> 32)),
	}
	var cerr error
	err := rc.Control(func(fd uintptr) {
		cerr = unix.EpollCtl(ip.epfd, op, int(fd), &ev)
		if op == unix.EPOLL_CTL_ADD && errors.Is(cerr, unix.EEXIST) {
			cerr = unix.EpollCtl(ip.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev)
		}
	})
	if err != nil {
		return err
	}
	return cerr
}

// register watches f's source socket, one-shot, and returns the token f
// must keep; ok is false when the poller cannot take it (stopped, the socket
// closed): f then waits on its own goroutine.
func (ip *Poller) register(f *flow) (tok uint64, ok bool) {
	if ip == nil {
		return 0, false
	}
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if ip.stopped {
		return 0, false
	}
	ip.next++
	tok = ip.next
	if err := ip.ctlLocked(f.raw, unix.EPOLL_CTL_ADD, tok); err != nil {
		return 0, false
	}
	ip.parked[tok] = f
	return tok, true
}

// unregister cancels the registration under tok (a no-op when it already
// fired). It runs before the socket is closed.
func (ip *Poller) unregister(rc syscall.RawConn, tok uint64) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if _, ok := ip.parked[tok]; !ok {
		return
	}
	delete(ip.parked, tok)
	if !ip.stopped {
		_ = ip.ctlLocked(rc, unix.EPOLL_CTL_DEL, 0)
	}
}

// Parked is the number of directions parked now (0 on a nil Poller).
func (ip *Poller) Parked() int {
	if ip == nil {
		return 0
	}
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return len(ip.parked)
}

// Woken is the number of directions resumed by a socket event so far.
func (ip *Poller) Woken() uint64 {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.woken
}

// Stop ends the poller's goroutine and closes its descriptors. Directions
// still parked (none after a drain) are resumed on goroutines of their own
// and keep them.
func (ip *Poller) Stop() {
	if ip == nil {
		return
	}
	ip.mu.Lock()
	if ip.stopped {
		ip.mu.Unlock()
		return
	}
	ip.stopped = true
	ip.mu.Unlock()
	one := [8]byte{1}
	_, _ = unix.Write(ip.wakefd, one[:])
	<-ip.done
	ip.mu.Lock()
	rest := ip.parked
	ip.parked = map[uint64]*flow{}
	for _, f := range rest {
		_ = ip.ctlLocked(f.raw, unix.EPOLL_CTL_DEL, 0)
	}
	unix.Close(ip.epfd)
	unix.Close(ip.wakefd)
	ip.mu.Unlock()
	for tok, f := range rest {
		f.wake(tok)
	}
}
