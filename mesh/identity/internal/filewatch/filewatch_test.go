package filewatch_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity/internal/filewatch"
)

func TestRunCallsBackOnlyWhenContentsChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("one"), 0o600))
	w := filewatch.New(20*time.Millisecond, path)

	ctx, cancel := context.WithCancel(testutil.Context(t, 0))
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func() { calls.Add(1) }) }()

	// Same bytes rewritten: no callback. A check that was under way when
	// the file was written may have read it before; the second check after
	// the write surely read it after.
	require.NoError(t, os.WriteFile(path, []byte("one"), 0o600))
	seen := w.Checks()
	testutil.Eventually(t, 0, func() bool { return w.Checks() >= seen+2 }, "two checks after the rewrite")
	assert.Zero(t, calls.Load())

	require.NoError(t, os.WriteFile(path, []byte("two"), 0o600))
	testutil.Eventually(t, 0, func() bool { return calls.Load() == 1 }, "no callback after a change")

	// A symlink swap, as Kubernetes does for mounted Secrets.
	other := filepath.Join(dir, "g")
	require.NoError(t, os.WriteFile(other, []byte("three"), 0o600))
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Symlink(other, tmp))
	require.NoError(t, os.Rename(tmp, path))
	testutil.Eventually(t, 0, func() bool { return calls.Load() == 2 }, "no callback after a symlink swap")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("Run did not return after cancellation")
	}
}
