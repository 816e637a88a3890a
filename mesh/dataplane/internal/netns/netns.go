// Package netns creates throw-away Linux network namespaces for Weft's end
// to end tests and runs code inside them. It is test support: every
// namespace it makes is named with a random suffix and removed by Delete.
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Available reports why namespaces cannot be used here, or nil when they can
// (root, the ip command and iptables present).
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: not running as root")
	}
	for _, bin := range []string{"ip", "iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("netns: %s not found: %w", bin, err)
		}
	}
	return nil
}

// NS is a named network namespace.
type NS struct{ Name string }

// New creates a namespace named prefix-<random> with its loopback up.
// ctx bounds the start only (the ip commands); the namespace stays until
// Delete.
func New(ctx context.Context, prefix string) (*NS, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := &NS{Name: prefix + "-" + hex.EncodeToString(b[:])}
	if err := Run(ctx, "ip", "netns", "add", ns.Name); err != nil {
		return nil, err
	}
	if err := ns.Run(ctx, "ip", "link", "set", "lo", "up"); err != nil {
		_ = ns.Delete()
		return nil, err
	}
	return ns, nil
}

// Delete removes the namespace (and the veth ends inside it).
func (ns *NS) Delete() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Run(ctx, "ip", "netns", "del", ns.Name)
}

// Run runs a command inside the namespace.
func (ns *NS) Run(ctx context.Context, name string, args ...string) error {
	return Run(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Output runs a command inside the namespace and returns its output.
func (ns *NS) Output(ctx context.Context, name string, args ...string) (string, error) {
	argv := append([]string{"netns", "exec", ns.Name, name}, args...)
	out, err := exec.CommandContext(ctx, "ip", argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns: ip %s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// Command prepares a command run inside the namespace.
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command in the current namespace.
func Run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Do runs f on an OS thread that has entered the namespace. Sockets created
// by f stay in the namespace after Do returns.
func (ns *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is only unlocked when it is back in its original
		// namespace; otherwise it dies with this goroutine.
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/var/run/netns/" + ns.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: entering %s: %w", ns.Name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// Dial opens a TCP connection from inside the namespace.
func (ns *NS) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// Listen opens a TCP listener inside the namespace.
func (ns *NS) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}
