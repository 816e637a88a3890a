package bench_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunScriptQuickLayer4ProducesTheTable runs `bench/run.sh --quick
// --l4-only` and checks that it finished without failures and wrote the
// layer-4 table with the Weft pair in it. It is a check that the harness
// still works, not a performance test: no figure is asserted.
func TestRunScriptQuickLayer4ProducesTheTable(t *testing.T) {
	if os.Getenv("WEFT_BENCH") != "1" {
		t.Skip("benchmark harness not requested: set WEFT_BENCH=1 to run bench/run.sh --quick --l4-only (about a minute; needs haproxy for the HAProxy column)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "result.md")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "run.sh", "--quick", "--l4-only", "--out", out)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	require.NoError(t, err, "run.sh failed:\n%s\n%s", stdout.String(), stderr.String())

	written, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, stdout.String(), string(written), "the table on stdout and in --out differ")
	report := string(written)
	assert.Contains(t, report, "### Layer 4 (issue 7)")
	assert.Contains(t, report, "| measure | direct | Weft pair (mTLS) |")
	assert.Regexp(t, `\| throughput, 1 connection \(MB/s\) \| [0-9.]+ \| [0-9.]+ \|`, report)
	assert.Regexp(t, `\| new connections per second \(8 clients\) \| [0-9]+ \| [0-9]+ \|`, report)
	assert.NotContains(t, report, "### Failures")
}
