package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	dir string
	v2  bool
	// cpuset is true for the v1 cpuset hierarchy, whose new groups have
	// no CPUs or memory nodes until given some.
	cpuset bool
}

// cgroupMounts lists the cgroup hierarchies mounted on this machine.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mount-point ... - fstype source super-options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup":
			out = append(out, cgroupMount{dir: pf[4], cpuset: hasOption(qf[2], "cpuset")})
		case "cgroup2":
			out = append(out, cgroupMount{dir: pf[4], v2: true})
		}
	}
	return out, sc.Err()
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// makeCgroupRoot creates the kubelet's cgroup root in every v1 hierarchy
// (the kubelet wants it to exist), giving the cpuset one its parent's CPUs
// and memory nodes.
func makeCgroupRoot(root string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m.v2 {
			continue
		}
		dir := filepath.Join(m.dir, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cluster: cgroup %s: %w", dir, err)
		}
		if m.cpuset {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(m.dir, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cluster: cgroup %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

// cgroupDirs returns every existing cgroup directory at or below root, in
// every hierarchy, deepest first.
func cgroupDirs(root string) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range mounts {
		top := filepath.Join(m.dir, root)
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(dirs, func(i, j int) bool {
		if a, b := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/"); a != b {
			return a > b
		}
		return dirs[i] < dirs[j]
	})
	return dirs, nil
}

// cgroupPIDs lists the processes in the cgroup directories.
func cgroupPIDs(dirs []string) []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// removeCgroups kills every process below root and removes the cgroup
// directories, deepest first.
func removeCgroups(root string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		dirs, err := cgroupDirs(root)
		if err != nil {
			return err
		}
		pids := cgroupPIDs(dirs)
		if len(pids) == 0 {
			var errs []error
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
					errs = append(errs, fmt.Errorf("%s: %w", d, err))
				}
			}
			if len(errs) == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster: remove cgroups: %w", errors.Join(errs...))
			}
		} else {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster: processes %v still in cgroups below %s", pids, root)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
