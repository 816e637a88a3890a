package iptables

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CloseWaitSysctl is the path, under /proc, of the conntrack timeout for
// TCP connections in CLOSE_WAIT. It is per network namespace, so setting
// it in a pod changes only that pod.
const CloseWaitSysctl = "sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait"

// SetCloseWaitTimeout writes d, in whole seconds, to the close-wait
// conntrack timeout under procRoot ("/proc" in a pod; a directory of the
// caller's in tests). Linux mounts /proc/sys read-only in unprivileged
// containers, so weft-init needs a privileged container for this.
func SetCloseWaitTimeout(procRoot string, d time.Duration) error {
	secs := int64(d / time.Second)
	if secs < 1 {
		return fmt.Errorf("iptables: close-wait timeout %s is under a second", d)
	}
	path := filepath.Join(procRoot, CloseWaitSysctl)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("iptables: setting the close-wait timeout: %w", err)
	}
	if _, err := f.WriteString(strconv.FormatInt(secs, 10) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("iptables: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("iptables: writing %s: %w", path, err)
	}
	return nil
}
