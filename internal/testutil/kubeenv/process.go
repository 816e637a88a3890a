package kubeenv

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child program whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File

	done    chan struct{} // closed once the process has been waited for
	waitErr error         // valid after done is closed

	stopOnce sync.Once
	stopErr  error
}

// startProcess runs bin with args, its output appended to logPath (and
// copied to out when it is not nil).
func startProcess(name, bin string, args []string, logPath string, out io.Writer) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubeenv: %s log: %w", name, err)
	}
	var w io.Writer = f
	if out != nil {
		w = io.MultiWriter(f, prefixWriter(out, name))
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.Stdin = nil
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("kubeenv: start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILL. It reports a process
// that had already ended by itself (a crash during the tests) and one that
// survives SIGKILL; being killed after the grace period is only logged.
func (p *process) stop(grace time.Duration, logger *slog.Logger) error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			p.stopErr = fmt.Errorf("kubeenv: %s (pid %d) had exited before Stop: %v", p.name, p.pid(), p.waitErr)
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.stopErr = fmt.Errorf("kubeenv: signal %s (pid %d): %w", p.name, p.pid(), err)
		}
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
		logger.Warn("kubeenv: process ignored SIGTERM, killing it", "name", p.name, "pid", p.pid(), "grace", grace)
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.stopErr = errors.Join(p.stopErr, fmt.Errorf("kubeenv: kill %s (pid %d): %w", p.name, p.pid(), err))
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.stopErr = errors.Join(p.stopErr, fmt.Errorf("kubeenv: %s (pid %d) still running after SIGKILL", p.name, p.pid()))
		}
	})
	return p.stopErr
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	data, err := readTail(p.logPath, 64<<10)
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", p.logPath, err)
	}
	return lastLines(string(data), n)
}

// readTail reads at most max trailing bytes of path.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// failure describes a process that ended or did not get ready, with the end
// of its log.
func (p *process) failure(what string) error {
	if ended, werr := p.exited(); ended {
		what = fmt.Sprintf("%s: exited (%v)", what, werr)
	}
	return fmt.Errorf("kubeenv: %s %s; last lines of %s:\n%s", p.name, what, p.logPath, indent(p.tail(30)))
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// prefixWriter writes each line to w with "[name] " before it.
func prefixWriter(w io.Writer, name string) io.Writer {
	return &prefixed{w: w, prefix: []byte("[" + name + "] ")}
}

type prefixed struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  []byte
	midLine bool
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for _, c := range b {
		if !p.midLine {
			out = append(out, p.prefix...)
			p.midLine = true
		}
		out = append(out, c)
		if c == '\n' {
			p.midLine = false
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
