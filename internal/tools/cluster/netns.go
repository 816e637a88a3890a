package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on an OS thread that has joined the network namespace
// at nsPath, then returns the thread to its own namespace. Sockets fn
// creates belong to nsPath's namespace for their whole life, whichever
// thread uses them later. If the thread cannot be returned it is left
// locked, so the runtime throws it away instead of reusing it.
func inNetns(nsPath string, fn func() error) error {
	target, err := os.Open(nsPath)
	if err != nil {
		return fmt.Errorf("cluster: network namespace: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cluster: own network namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cluster: enter the node's network namespace (root needed): %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("cluster: leave the node's network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// dialIn opens a connection from inside the network namespace at nsPath.
func dialIn(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) == nil {
		// Name resolution would run on other threads, outside the
		// namespace: only addresses are accepted.
		return nil, fmt.Errorf("cluster: dial %s: want an IP address, not a name", addr)
	}
	var c net.Conn
	err = inNetns(nsPath, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// nsInode returns the inode of the namespace file nsPath
// (/proc/<pid>/ns/net), which names the namespace.
func nsInode(nsPath string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(nsPath, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
