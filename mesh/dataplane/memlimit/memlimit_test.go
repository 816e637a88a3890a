package memlimit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/memlimit"
)

// fakeRoot writes files (path relative to the root -> content) under a new
// directory and returns it.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return root
}

func noEnv(string) (string, bool) { return "", false }

// recorder stands in for debug.SetMemoryLimit.
type recorder struct {
	calls []int64
}

func (r *recorder) set(n int64) int64 { r.calls = append(r.calls, n); return 0 }

func TestApplySetsNineTenthsOfTheCgroupV2LimitOfTheProcesssOwnCgroup(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
		"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "104857600\n",
		"sys/fs/cgroup/memory.max":                  "max\n", // the namespace root: not the process's cgroup
	})
	var rec recorder
	r, err := memlimit.Apply(root, memlimit.DefaultFraction, noEnv, rec.set)
	require.NoError(t, err)
	assert.Equal(t, int64(104857600), r.Container)
	assert.Equal(t, int64(94371840), r.Limit)
	assert.Equal(t, filepath.Join(root, "sys/fs/cgroup/kubepods/pod1/c1/memory.max"), r.Source)
	assert.Equal(t, []int64{94371840}, rec.calls)
}

func TestApplyReadsTheNamespaceRootWhenTheProcesssCgroupIsOnlyVisibleThere(t *testing.T) {
	// Inside a cgroup namespace /proc/self/cgroup says "0::/" and the
	// container's files are at the mount's top.
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup":         "0::/\n",
		"sys/fs/cgroup/memory.max": "67108864",
	})
	var rec recorder
	r, err := memlimit.Apply(root, 0.5, noEnv, rec.set)
	require.NoError(t, err)
	assert.Equal(t, int64(33554432), r.Limit)
	assert.Equal(t, []int64{33554432}, rec.calls)
}

func TestApplyReadsTheCgroupV1MemoryController(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup": "12:cpu,cpuacct:/kubepods/x\n11:memory:/kubepods/x\n1:name=systemd:/kubepods/x\n",
		"sys/fs/cgroup/memory/kubepods/x/memory.limit_in_bytes": "209715200\n",
	})
	var rec recorder
	r, err := memlimit.Apply(root, memlimit.DefaultFraction, noEnv, rec.set)
	require.NoError(t, err)
	assert.Equal(t, int64(209715200), r.Container)
	assert.Equal(t, []int64{188743680}, rec.calls)
}

func TestApplyReadsTheV1MemoryControllerOnAHybridHierarchy(t *testing.T) {
	// systemd's hybrid layout: a v2 line for the unified hierarchy, with
	// the memory controller still on v1 (no memory.max anywhere).
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup": "4:memory:/process_api/abc\n0::/\n",
		"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "1073741824\n",
	})
	var rec recorder
	r, err := memlimit.Apply(root, memlimit.DefaultFraction, noEnv, rec.set)
	require.NoError(t, err)
	assert.Equal(t, int64(1073741824), r.Container)
	assert.Equal(t, []int64{966367641}, rec.calls)
}

func TestApplySetsNothingWithoutALimit(t *testing.T) {
	cases := map[string]map[string]string{
		"v2 max": {"proc/self/cgroup": "0::/a\n", "sys/fs/cgroup/a/memory.max": "max\n"},
		"v1 unlimited": {"proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"},
		"no cgroup files":      {"proc/self/cgroup": "0::/a\n"},
		"no /proc/self/cgroup": {},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			var rec recorder
			r, err := memlimit.Apply(fakeRoot(t, files), memlimit.DefaultFraction, noEnv, rec.set)
			require.NoError(t, err)
			assert.Equal(t, memlimit.Result{}, r)
			assert.Empty(t, rec.calls)
		})
	}
}

func TestAnExplicitGOMEMLIMITWinsOverTheCgroup(t *testing.T) {
	root := fakeRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1048576"})
	for _, v := range []string{"off", "512MiB"} {
		var rec recorder
		env := func(k string) (string, bool) { return v, k == "GOMEMLIMIT" }
		r, err := memlimit.Apply(root, memlimit.DefaultFraction, env, rec.set)
		require.NoError(t, err)
		assert.Equal(t, "GOMEMLIMIT", r.Source)
		assert.Zero(t, r.Limit)
		assert.Empty(t, rec.calls, "GOMEMLIMIT=%s", v)
	}
}

func TestBadCgroupFilesAreErrorsNamingTheFileAndSetNothing(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"not a number":   {map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"}, `memory.max: "lots" is not a memory limit`},
		"negative":       {map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "-5"}, `"-5" is not a memory limit`},
		"zero":           {map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "0"}, `"0" is not a memory limit`},
		"overflow":       {map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "99999999999999999999999"}, "is not a memory limit"},
		"huge garbage":   {map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": strings.Repeat("9", 1<<20)}, "..."},
		"bad line":       {map[string]string{"proc/self/cgroup": "garbage\n"}, "is not ID:CONTROLLERS:PATH"},
		"path traversal": {map[string]string{"proc/self/cgroup": "0::/../../etc\n"}, "not a clean absolute path"},
		"relative path":  {map[string]string{"proc/self/cgroup": "0::etc\n"}, "not a clean absolute path"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var rec recorder
			r, err := memlimit.Apply(fakeRoot(t, c.files), memlimit.DefaultFraction, noEnv, rec.set)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.True(t, strings.HasPrefix(err.Error(), "memlimit: "), err.Error())
			assert.Less(t, len(err.Error()), 400, "the error does not echo a whole file")
			assert.Equal(t, memlimit.Result{}, r)
			assert.Empty(t, rec.calls)
		})
	}
}

func TestAFractionOutsideZeroToOneIsRefused(t *testing.T) {
	for _, f := range []float64{0, -0.5, 1.5} {
		var rec recorder
		_, err := memlimit.Apply(t.TempDir(), f, noEnv, rec.set)
		require.ErrorContains(t, err, "is not in (0, 1]")
		assert.Empty(t, rec.calls)
	}
}
