package testutil

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ServerProcess is a server running in a child process.
type ServerProcess struct {
	Addr   string        // what it printed as its first line
	Stdin  io.Writer     // its standard input, for a protocol of the test's own
	Stdout *bufio.Reader // the rest of its standard output
}

// StartServerProcess starts cmd, a server in a child process (usually the
// test binary re-executed), and returns once it has printed its address
// as the first line of its standard output. The child's standard error
// goes to the test's. The child is asked to stop by closing its standard
// input when the test ends; it is killed if it has not stopped 20 s
// later, or if it prints no line within DefaultTimeout.
func StartServerProcess(tb testing.TB, cmd *exec.Cmd) *ServerProcess {
	tb.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("testutil: child process stdin: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("testutil: child process stdout: %v", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testutil: starting %s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			tb.Errorf("testutil: %s did not stop within 20 s of its stdin closing; killing it", cmd.Path)
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	out := bufio.NewReader(stdout)
	lines := make(chan string, 1)
	go func() {
		line, _ := out.ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case addr := <-lines:
		if addr == "" {
			tb.Fatalf("testutil: %s printed no address", cmd.Path)
		}
		return &ServerProcess{Addr: addr, Stdin: stdin, Stdout: out}
	case <-time.After(DefaultTimeout):
		_ = cmd.Process.Kill()
		tb.Fatalf("testutil: %s printed no address within %s", cmd.Path, DefaultTimeout)
		return nil
	}
}
