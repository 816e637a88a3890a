package dev_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

func TestTheExampleMeshFileRunsUnderWeftDev(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "app")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./app").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	t.Setenv("DEV_APP", bin)

	var stdout, stderr buffer
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- cli.DevCommand().Run(rctx, []string{"--config", "mesh.yaml", "--log-level", "warn"}, cli.IO{Stdout: &stdout, Stderr: &stderr})
	}()
	ok := func() bool {
		s := stdout.String()
		return strings.Contains(s, "[web-0] 200 hello from api-0") && strings.Contains(s, "[stranger-0] ")
	}
	// Wait for both callers' answers, or for weft dev to end early.
	waitCtx, stopWaiting := context.WithTimeout(rctx, 60*time.Second)
	defer stopWaiting()
	testutil.Poll(waitCtx, func() bool {
		select {
		case code := <-done:
			t.Errorf("weft dev exited with %d\n%s\n%s", code, stdout.String(), stderr.String())
			done <- code
			return true
		default:
		}
		return ok()
	})
	stop()
	select {
	case code := <-done:
		assert.Equal(t, cli.ExitOK, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("weft dev did not stop")
	}
	s := stdout.String()
	assert.Contains(t, s, "[web-0] 200 hello from api-0 (api.shop.serviceaccount.identity.weft.cluster.local)")
	assert.NotContains(t, s, "[stranger-0] 200")
	assert.Regexp(t, `\[stranger-0\] (403|call failed)`, s)
}
