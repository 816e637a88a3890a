package kubeenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWithTBTurnsAFatalIntoAnError(t *testing.T) {
	err := withTB(func(tb testing.TB) {
		tb.Helper()
		tb.Fatalf("testutil: write %s: %s", "/x", "denied")
		t.Error("Fatalf returned")
	})
	require.Error(t, err)
	assert.Equal(t, "kubeenv: testutil: write /x: denied", err.Error())
}

func TestWithTBTurnsAnUnsupportedCallIntoAnError(t *testing.T) {
	err := withTB(func(tb testing.TB) { _ = tb.Name() })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubeenv: test helper failed")
}

func TestMakeFilesReportsAnUnwritableDirectory(t *testing.T) {
	// A regular file where a directory should be stops even root.
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	_, err := makeFiles(filepath.Join(blocker, "sub"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubeenv: testutil: mkdir")
}
