package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultFraction is the share of the container's limit given to the Go
// runtime as its soft limit.
const DefaultFraction = 0.9

// unlimited is the smallest value read as "no limit": cgroup v1 reports
// an unset limit as the largest page-aligned int64.
const unlimited = 1 << 62

// maxFileBytes bounds what is read from one cgroup file.
const maxFileBytes = 64 << 10

// Result says what Apply decided.
type Result struct {
	// Limit is the runtime limit set, in bytes; 0 when none was set.
	Limit int64
	// Container is the container's limit in bytes; 0 when there is none.
	Container int64
	// Source names where the decision came from: "GOMEMLIMIT" (the
	// variable was set and wins), the cgroup file read, or "" when no
	// limit was found.
	Source string
}

// Apply sets the runtime's memory limit to fraction of the container's
// limit found under root, unless GOMEMLIMIT is set in the environment
// (read through getenv). set is the setter (runtime/debug.SetMemoryLimit
// in production). fraction must be in (0, 1].
func Apply(root string, fraction float64, getenv func(string) (string, bool), set func(int64) int64) (Result, error) {
	if !(fraction > 0 && fraction <= 1) {
		return Result{}, fmt.Errorf("memlimit: fraction %v is not in (0, 1]", fraction)
	}
	if v, ok := getenv("GOMEMLIMIT"); ok && v != "" {
		return Result{Source: "GOMEMLIMIT"}, nil
	}
	limit, file, err := ContainerLimit(root)
	if err != nil || limit == 0 {
		return Result{}, err
	}
	r := Result{Container: limit, Source: file, Limit: int64(float64(limit) * fraction)}
	set(r.Limit)
	return r, nil
}

// ContainerLimit returns the memory limit of the cgroup this process runs
// in, read under root, and the file it came from; 0 when there is no
// limit. cgroup v2 is tried first, then v1.
func ContainerLimit(root string) (int64, string, error) {
	v2, v1, err := cgroupPaths(root)
	if err != nil {
		return 0, "", err
	}
	var candidates []string
	if v2 != "" {
		// The process's own cgroup, then the namespace root (inside a
		// container's cgroup namespace both are the container's).
		candidates = append(candidates,
			filepath.Join(root, "sys/fs/cgroup", v2, "memory.max"),
			filepath.Join(root, "sys/fs/cgroup/memory.max"))
	}
	if v1 != "" {
		candidates = append(candidates,
			filepath.Join(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"),
			filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
	}
	for _, f := range candidates {
		limit, err := readLimit(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", err
		}
		return limit, f, nil
	}
	return 0, "", nil
}

// cgroupPaths reads root/proc/self/cgroup: the v2 path ("0::/path") and
// the v1 memory controller's path ("N:...memory...:/path"), each "" when
// absent. A missing file means neither.
func cgroupPaths(root string) (v2, v1 string, err error) {
	name := filepath.Join(root, "proc/self/cgroup")
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("memlimit: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxFileBytes))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return "", "", fmt.Errorf("memlimit: %s: line %q is not ID:CONTROLLERS:PATH", name, sc.Text())
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok {
			return "", "", fmt.Errorf("memlimit: %s: line %q is not ID:CONTROLLERS:PATH", name, sc.Text())
		}
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return "", "", fmt.Errorf("memlimit: %s: cgroup path %q is not a clean absolute path", name, path)
		}
		switch {
		case id == "0" && controllers == "":
			v2 = path
		case hasController(controllers, "memory"):
			v1 = path
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("memlimit: %s: %w", name, err)
	}
	return v2, v1, nil
}

func hasController(list, want string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == want {
			return true
		}
	}
	return false
}

// readLimit reads a limit file: a byte count, or "max" (no limit).
func readLimit(name string) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		return 0, fmt.Errorf("memlimit: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes))
	if err != nil {
		return 0, fmt.Errorf("memlimit: %s: %w", name, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return 0, fmt.Errorf("memlimit: %s: %q is not a memory limit (bytes or max)", name, s)
	}
	if n >= unlimited {
		return 0, nil
	}
	return n, nil
}
