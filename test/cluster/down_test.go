//go:build clusterintegration

package cluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/internal/tools/cluster"
)

// hostState is what a cluster must leave as it found it.
type hostState struct {
	interfaces []string
	iptables   string
	mounts     []string
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

func snapshotHost(t *testing.T) hostState {
	t.Helper()
	var s hostState
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		s.interfaces = append(s.interfaces, fmt.Sprintf("%s %s %s %v", i.Name, i.HardwareAddr, i.Flags, addrs))
	}
	sort.Strings(s.interfaces)
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).CombinedOutput()
		require.NoError(t, err, "%s: %s", tool, out)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "#") {
				continue // generated-at and completed-at stamps
			}
			s.iptables += counters.ReplaceAllString(line, "") + "\n"
		}
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	s.mounts = strings.Split(strings.TrimSpace(string(b)), "\n")
	return s
}

func assertSameHost(t *testing.T, when string, before, now hostState) {
	t.Helper()
	assert.Equal(t, before.interfaces, now.interfaces, "%s: the host's interfaces", when)
	assert.Equal(t, before.iptables, now.iptables, "%s: the host's iptables rules", when)
	assert.Equal(t, before.mounts, now.mounts, "%s: the host's mounts", when)
}

// TestClusterDownLeavesTheHostAsFound starts a second, throwaway cluster
// with hack/cluster.sh (from the binaries make cluster-up built), checks
// that the host's interfaces, iptables rules and mounts do not change while
// it runs, takes it down, and checks that they are as before and that none
// of its processes, cgroups or files is left.
func TestClusterDownLeavesTheHostAsFound(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and the test needs root")
		}
		t.Skip("needs root")
	}
	name := "downtest-" + randomSuffix()[:4]
	dir := filepath.Join(os.TempDir(), "weft-"+name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := cluster.NewLayout(name, dir)
	require.NoError(t, err)
	script := func(cmd string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "hack", "cluster.sh"), cmd)
		c.Env = append(os.Environ(), "WEFT_CLUSTER_NAME="+name, "WEFT_CLUSTER_DIR="+dir, "WEFT_KUBE_NO_BUILD=1")
		out, err := c.CombinedOutput()
		if err != nil && strings.Contains(string(out), "WEFT_KUBE_NO_BUILD=1") && os.Getenv("CI") != "true" {
			t.Skipf("the cluster's binaries are not built (make cluster-up builds them): %s", out)
		}
		require.NoError(t, err, "hack/cluster.sh %s:\n%s", cmd, out)
	}

	before := snapshotHost(t)
	script("up")
	s, err := cluster.Load(l)
	require.NoError(t, err)
	assertSameHost(t, "while the cluster runs", before, snapshotHost(t))
	// The cluster really runs: its node answers through the forwarder.
	cfg, err := s.RESTConfig()
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	node, err := kube.CoreV1().Nodes().Get(timeout(t, time.Minute), cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, node.Status.NodeInfo.KubeletVersion)
	procs := append([]cluster.Proc{s.Holder}, s.Procs...)
	netns, err := os.Readlink(s.NetNSPath())
	require.NoError(t, err)
	mntns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", s.Holder.PID))
	require.NoError(t, err)
	cgroupDirs, _ := filepath.Glob("/sys/fs/cgroup/*" + l.CgroupRoot())
	require.NotEmpty(t, cgroupDirs, "the kubelet's cgroup root exists while up")

	script("down")
	assertSameHost(t, "after make cluster-down", before, snapshotHost(t))
	for _, p := range procs {
		assert.False(t, p.Alive(), "%s (pid %d) still runs", p.Name, p.PID)
	}
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		for _, kind := range []string{"net", "mnt"} {
			link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
			assert.NotContains(t, []string{netns, mntns}, link, "process %d is still in the node's %s namespace", pid, kind)
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		assert.NotContains(t, string(cmdline), dir, "process %d still uses the state directory", pid)
	}
	left, _ := filepath.Glob("/sys/fs/cgroup/*" + l.CgroupRoot())
	assert.Empty(t, left, "cgroups left")
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the state directory is removed (%v)", err)
}
