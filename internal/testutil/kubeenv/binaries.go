package kubeenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoBinaries is wrapped by FindBinaries (and so by Start) when neither
// the options, the environment nor the build script yield both binaries.
// Test suites may branch on it to skip locally and fail in CI. A path that
// was set (option or environment variable) but is wrong is a configuration
// error and does not wrap it.
var ErrNoBinaries = errors.New("kubeenv: kube-apiserver and etcd binaries not available")

// Binaries are the paths of the two programs Start runs.
type Binaries struct {
	APIServer string
	Etcd      string
}

// FindBinaries locates kube-apiserver and etcd: paths given with WithBinaries
// first, then the environment variables WEFT_KUBE_APISERVER and WEFT_ETCD,
// then the output of `hack/kube-testenv.sh env` (which builds and caches
// them the first time; ctx bounds that). A path that is set but is not an
// executable file is an error naming where it came from.
func FindBinaries(ctx context.Context, opts ...Option) (Binaries, error) {
	c := newConfig(opts)
	return findBinaries(ctx, &c)
}

func findBinaries(ctx context.Context, c *config) (Binaries, error) {
	b := c.binaries
	var err error
	if b.APIServer, err = fromSetting(b.APIServer, "WithBinaries apiserver", EnvAPIServer); err != nil {
		return Binaries{}, err
	}
	if b.Etcd, err = fromSetting(b.Etcd, "WithBinaries etcd", EnvEtcd); err != nil {
		return Binaries{}, err
	}
	if b.APIServer != "" && b.Etcd != "" {
		return b, nil
	}

	script := c.script
	if script == "" {
		script, err = findScript()
		if err != nil {
			return Binaries{}, fmt.Errorf("%w: set %s and %s, or run from the Weft repository: %w", ErrNoBinaries, EnvAPIServer, EnvEtcd, err)
		}
	}
	fromScript, err := runScript(ctx, c, script)
	if err != nil {
		return Binaries{}, fmt.Errorf("%w: %w", ErrNoBinaries, err)
	}
	if b.APIServer == "" {
		if b.APIServer, err = checkExecutable(fromScript[EnvAPIServer], script+" output "+EnvAPIServer); err != nil {
			return Binaries{}, fmt.Errorf("%w: %w", ErrNoBinaries, err)
		}
	}
	if b.Etcd == "" {
		if b.Etcd, err = checkExecutable(fromScript[EnvEtcd], script+" output "+EnvEtcd); err != nil {
			return Binaries{}, fmt.Errorf("%w: %w", ErrNoBinaries, err)
		}
	}
	return b, nil
}

// fromSetting returns the option's path or else the environment variable's,
// checked; "" when neither is set.
func fromSetting(opt, optName, env string) (string, error) {
	if opt != "" {
		return checkExecutable(opt, optName)
	}
	if v := os.Getenv(env); v != "" {
		return checkExecutable(v, env)
	}
	return "", nil
}

// checkExecutable makes path absolute after checking that it is an
// executable file. A path that was set on purpose and is wrong is a
// configuration error, not a missing binary, so it does not wrap
// ErrNoBinaries.
func checkExecutable(path, from string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("kubeenv: %s is empty", from)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("kubeenv: %s=%s: %w", from, path, err)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("kubeenv: %s=%s: not an executable file", from, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("kubeenv: %s=%s: %w", from, path, err)
	}
	return abs, nil
}

// findScript walks up from the working directory to the directory holding
// hack/kube-testenv.sh.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		p := filepath.Join(dir, "hack", "kube-testenv.sh")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no hack/kube-testenv.sh in the working directory or above it")
		}
		dir = parent
	}
}

// runScript runs `bash script env` and parses its KEY=VALUE lines.
func runScript(ctx context.Context, c *config, script string) (map[string]string, error) {
	c.logger.Info("kubeenv: asking the build script for the binaries (it builds them the first time, which takes many minutes)", "script", script)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "env")
	cmd.Dir = filepath.Dir(filepath.Dir(script))
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if c.output != nil {
		cmd.Stderr = io.MultiWriter(&stderr, c.output)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s env: %w (%w)", script, ctx.Err(), err)
		}
		return nil, fmt.Errorf("%s env: %w\n%s", script, err, lastLines(stderr.String(), 20))
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok {
			vars[k] = v
		}
	}
	return vars, nil
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "(no output)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
