package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewLayoutRefusesBadNamesAndLongDirectories(t *testing.T) {
	for _, name := range []string{"", "Weft", "a_b", "-a", "a-", "seventeen-chars-x", "a/b"} {
		_, err := NewLayout(name, t.TempDir())
		assert.Error(t, err, "%q", name)
	}
	_, err := NewLayout("weft", "/"+strings.Repeat("d", 80))
	assert.ErrorContains(t, err, "longer than 70 bytes")
	l, err := NewLayout("weft", "/tmp/x")
	require.NoError(t, err)
	assert.Equal(t, "/tmp/x/containerd/containerd.sock", l.ContainerdSocket())
	assert.Equal(t, "/weft-cluster-weft", l.CgroupRoot())
}

func TestDownTouchesNoDirectoryWithoutItsMarker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	keep := filepath.Join(dir, "precious")
	require.NoError(t, os.WriteFile(keep, []byte("mine"), 0o644))
	l, err := NewLayout("downtest", dir)
	require.NoError(t, err)
	err = Down(l, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "not a cluster state directory")
	_, err = os.Stat(keep)
	assert.NoError(t, err, "the file is still there")
}

func TestDownRemovesAStoppedClustersDirectoryAndIsIdempotent(t *testing.T) {
	// A short directory: t.TempDir's name carries the test's and would
	// not leave room for the unix sockets the layout places in it.
	base, err := os.MkdirTemp("", "wc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "state")
	l, err := NewLayout("downtest", dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(l.PIDDir(), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, markerFile), nil, 0o644))
	// A pid file of a process that is long gone (pid 1 with another start
	// time): Down must not touch pid 1.
	require.NoError(t, os.WriteFile(filepath.Join(l.PIDDir(), "kubelet.pid"), []byte("1 999999999999\n"), 0o644))
	require.NoError(t, Down(l, slog.New(slog.DiscardHandler)))
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err))
	require.NoError(t, Down(l, slog.New(slog.DiscardHandler)), "a second down finds nothing to do")
}

func TestForwardJoinsEachConnectionToTheTarget(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "echo %s\n", sc.Text())
				}
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Forward(ctx, ln, echo.Addr().String()) }()

	for i := range 3 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		fmt.Fprintf(c, "hello %d\n", i)
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("echo hello %d\n", i), line)
		c.Close()
	}
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Forward did not return after its context ended")
	}
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "the listener is closed")
}

func TestForwardClosesTheClientWhenTheTargetIsDown(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	target := dead.Addr().String()
	dead.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Forward(ctx, ln, target) //nolint:errcheck
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
}

func TestNodeSetupBindsEveryKubeletSysctlAndStaysInsideTheNamespace(t *testing.T) {
	l, err := NewLayout("weft", "/tmp/x")
	require.NoError(t, err)
	script := l.nodeSetup()
	for name := range nodeSysctls {
		assert.Contains(t, script, "/proc/sys/"+name)
	}
	// Nothing but the node's own interfaces and mounts over /var/lib,
	// /var/log, /run and the sysctl files.
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		if strings.HasPrefix(line, "mount ") {
			f := strings.Fields(line)
			target := f[len(f)-1]
			ok := target == "/var/lib" || target == "/var/log" || target == "/run" || strings.HasPrefix(target, "/proc/sys/")
			assert.True(t, ok, "unexpected mount target in %q", line)
		}
	}
	assert.Contains(t, l.kubeletConfig(), "failCgroupV1: false")
	assert.Contains(t, l.containerdConfig(), "restrict_oom_score_adj = true")
	assert.Contains(t, l.kubeProxyConfig(), "maxPerCore: 0")
}
