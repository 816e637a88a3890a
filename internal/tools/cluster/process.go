package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process Up started, named so it can be found again: its pid
// and its start time (so a recycled pid is never mistaken for it).
type Proc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// running is a process Up started and still waits for.
type running struct {
	Proc
	done chan struct{}
	err  error
	log  string
}

// startTime reads the start time (field 22 of /proc/<pid>/stat, in clock
// ticks since boot) of pid.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state).
	if len(fields) < 20 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	if fields[0] == "Z" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Alive reports whether p still runs (same pid, same start time).
func (p Proc) Alive() bool {
	st, err := startTime(p.PID)
	return err == nil && st == p.Start
}

// start runs argv in the background, in a session of its own, with
// output appended to logs/<name>.log; extra files become fds 3, 4, ...
func (l Layout) start(name string, argv []string, extra ...*os.File) (*running, error) {
	logPath := filepath.Join(l.LogDir(), name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	r := &running{Proc: Proc{Name: name, PID: cmd.Process.Pid}, done: make(chan struct{}), log: logPath}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	st, err := startTime(r.PID)
	if err != nil {
		<-r.done
		return nil, fmt.Errorf("cluster: %s exited at once (%v): %s", name, r.err, tail(logPath))
	}
	r.Start = st
	if err := os.WriteFile(filepath.Join(l.PIDDir(), name+".pid"), fmt.Appendf(nil, "%d %d\n", r.PID, r.Start), 0o644); err != nil {
		return nil, err
	}
	return r, nil
}

// inNode runs argv inside the node's namespaces (nsenter).
func inNode(holder int, argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(holder), "--net", "--mount", "--"}, argv...)
}

// exited returns an error when r has exited.
func (r *running) exited() error {
	select {
	case <-r.done:
		return &exitedError{fmt.Errorf("cluster: %s exited (%v); the end of %s:\n%s", r.Name, r.err, r.log, tail(r.log))}
	default:
		return nil
	}
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

// readPIDFiles reads every pid file Up wrote.
func (l Layout) readPIDFiles() ([]Proc, error) {
	ents, err := os.ReadDir(l.PIDDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.PIDDir(), e.Name()))
		if err != nil {
			return nil, err
		}
		var p Proc
		if _, err := fmt.Sscanf(string(b), "%d %d", &p.PID, &p.Start); err != nil {
			return nil, fmt.Errorf("cluster: pid file %s: %w", e.Name(), err)
		}
		p.Name = name
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// killAndWait sends SIGKILL to every live process of ps and waits (at
// most timeout) until they are gone.
func killAndWait(ps []Proc, timeout time.Duration) error {
	for _, p := range ps {
		if p.Alive() {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, p := range ps {
			if p.Alive() {
				left = append(left, fmt.Sprintf("%s (%d)", p.Name, p.PID))
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: still running after SIGKILL: %s", strings.Join(left, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesIn lists the processes whose namespace of kind ("net", "mnt")
// has the given inode.
func processesIn(kind string, inode uint64) []Proc {
	ents, _ := os.ReadDir("/proc")
	want := fmt.Sprintf("%s:[%d]", kind, inode)
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		if err != nil || link != want {
			continue
		}
		st, err := startTime(pid)
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		out = append(out, Proc{Name: strings.TrimSpace(string(comm)), PID: pid, Start: st})
	}
	return out
}
