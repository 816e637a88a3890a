package iptables

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// NetCapabilities returns the capabilities the iptables commands need
// (CAP_NET_ADMIN to change the tables, CAP_NET_RAW for the raw socket
// iptables-legacy talks through) for Exec.AmbientCaps, when this process
// runs as a user other than root: a non-root process holds them through
// its binary's file capabilities (or ambient ones its parent gave it), and
// passes them to the commands it runs only as ambient capabilities. As
// root it returns nil (the commands run as root). It fails, naming what
// is missing, when a non-root process lacks either capability.
func NetCapabilities() ([]uintptr, error) {
	if os.Geteuid() == 0 {
		return nil, nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil, fmt.Errorf("iptables: reading this process's capabilities: %w", err)
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_NET_RAW, "CAP_NET_RAW"}} {
		if data[c.bit/32].Permitted&(1<<(c.bit%32)) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("iptables: running as uid %d without %v in the permitted set; give the binary the file capabilities cap_net_admin,cap_net_raw+ep (and its container NET_ADMIN and NET_RAW), or run it as root", os.Geteuid(), missing)
	}
	return []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}, nil
}

// withAmbient makes cmd start with the ambient capabilities caps.
func withAmbient(cmd *exec.Cmd, caps []uintptr) {
	if len(caps) == 0 {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{AmbientCaps: caps}
}
