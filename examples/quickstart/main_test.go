package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuickstartBuildsAndShowsMutualTLSAndADenial(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quickstart")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	out, err = exec.CommandContext(rctx, bin, "--requests", "2").CombinedOutput()
	require.NoError(t, err, "%s", out)
	s := string(out)
	t.Log(s)
	assert.Contains(t, s, "pod greeter-0 at 127.0.")
	assert.Equal(t, 2, strings.Count(s, "client -> greeter: hello from greeter-0"))
	assert.Equal(t, 2, strings.Count(s, "stranger -> greeter: refused"))
	assert.Regexp(t, `greeter's proxy: inbound_\w+_authz_allow_total peer=client\.quickstart\.serviceaccount\.identity\.weft\.cluster\.local mtls=true count=[1-9]`, s)
	assert.Regexp(t, `greeter's proxy: inbound_\w+_authz_deny_total peer=stranger\.quickstart\.serviceaccount\.identity\.weft\.cluster\.local mtls=true count=[1-9]`, s)
}
