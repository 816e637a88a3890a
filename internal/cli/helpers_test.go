package cli_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

// runCommand runs cmd with args and stdin to completion and returns its
// exit status, stdout and stderr.
func runCommand(t *testing.T, cmd cli.Command, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cmd.Run(testutil.Context(t, 0), args, cli.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// startController runs a long-lived controller command until the test
// ends, waits for its "<name> listening addr=..." log line and returns the
// address and the logs. The command must stop cleanly when cancelled.
func startController(t *testing.T, cmd cli.Command, name string, args ...string) (string, *testutil.SyncBuffer) {
	t.Helper()
	listenRE := regexp.MustCompile(`msg="` + regexp.QuoteMeta(name) + ` listening" addr=(\S+)`)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cmd.Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: logs, Stderr: logs})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case st := <-done:
			assert.Equal(t, cli.ExitOK, st, "clean shutdown: %s", logs.String())
		case <-time.After(testutil.DefaultTimeout):
			t.Error("the controller did not stop after cancellation")
		}
	})
	var addr string
	testutil.Eventually(t, 0, func() bool {
		select {
		case st := <-done:
			t.Fatalf("the controller exited with %d: %s", st, logs.String())
		default:
		}
		if m := listenRE.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, name+" to listen")
	return addr, logs
}
