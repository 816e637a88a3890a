package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// markerFile marks a directory as a cluster's state directory: Down
// removes only directories that carry it.
const markerFile = "weft-cluster"

// Down removes everything Up made for layout l: the containers (every
// process in the cgroups below the kubelet's cgroup root), every process
// in the node's namespaces (which takes the namespaces, their interfaces,
// iptables rules and mounts with them), the processes Up recorded, the
// cgroups and the state directory. It does nothing when there is nothing
// to remove, and may be run any number of times.
func Down(l Layout, log *slog.Logger) error {
	if st, err := os.Stat(l.Dir); err == nil && st.IsDir() {
		if _, err := os.Stat(filepath.Join(l.Dir, markerFile)); err != nil {
			entries, _ := os.ReadDir(l.Dir)
			if len(entries) > 0 {
				return fmt.Errorf("cluster: %s is not a cluster state directory (no %s file); not touching it", l.Dir, markerFile)
			}
		}
	}
	var s State
	if b, err := os.ReadFile(l.StateFile()); err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			log.Warn("unreadable state file; going by pid files and cgroups", "err", err)
		}
	}
	recorded, err := l.readPIDFiles()
	if err != nil {
		return err
	}
	var errs []error
	// The kubelet first, so that it restarts nothing.
	for _, p := range recorded {
		if p.Name == "kubelet" && p.Alive() {
			log.Info("stopping the kubelet", "pid", p.PID)
			if err := killAndWait([]Proc{p}, 10*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := removeCgroups(l.CgroupRoot(), 30*time.Second); err != nil {
		errs = append(errs, err)
	}
	// Everything else in the node's namespaces (containerd, its shims, the
	// control plane, the forwarder), then what the pid files name.
	var left []Proc
	if s.NetNS != 0 && s.Holder.Alive() {
		left = append(left, processesIn("net", s.NetNS)...)
	}
	if s.MntNS != 0 && s.Holder.Alive() {
		left = append(left, processesIn("mnt", s.MntNS)...)
	}
	left = append(left, recorded...)
	if n := len(left); n > 0 {
		log.Info("stopping the node's processes", "count", n)
	}
	if err := killAndWait(left, 30*time.Second); err != nil {
		errs = append(errs, err)
	}
	// Pods started while the node was being stopped.
	if err := removeCgroups(l.CgroupRoot(), 30*time.Second); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		return fmt.Errorf("cluster: remove %s: %w", l.Dir, err)
	}
	return nil
}
