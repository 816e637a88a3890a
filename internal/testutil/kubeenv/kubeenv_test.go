package kubeenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/kubeenv"
)

// These tests run Start and Stop against stand-ins for etcd and
// kube-apiserver: this test binary started again with KUBEENV_FAKE_PROCESS
// set, serving the health and readiness endpoints the way the real programs
// do (or failing in the way KUBEENV_FAKE_MODE asks). The real programs are
// exercised by the kubeintegration suite.

const (
	fakeProcessEnv = "KUBEENV_FAKE_PROCESS"
	fakeModeEnv    = "KUBEENV_FAKE_MODE"
	fakeStateEnv   = "KUBEENV_FAKE_STATE"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeProcessEnv) == "1" {
		os.Exit(runFake(os.Args[1:]))
	}
	// No goroutine (a process watcher, a log copier) outlives the tests.
	goleak.VerifyTestMain(m)
}

// fakeBinaries makes the test binary stand in for both programs, in the
// given mode, with dir for files the fakes leave behind.
func fakeBinaries(t *testing.T, mode string) (kubeenv.Option, string) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	state := t.TempDir()
	t.Setenv(fakeProcessEnv, "1")
	t.Setenv(fakeModeEnv, mode)
	t.Setenv(fakeStateEnv, state)
	// Under -race a program sleeps a second before it exits; the fakes
	// need not.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	// Start's temporary directory goes here, so a test can see it is gone.
	t.Setenv("TMPDIR", t.TempDir())
	return kubeenv.WithBinaries(self, self), state
}

func startCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStartServesAnAdminConfigAndStopRemovesEverything(t *testing.T) {
	bins, state := fakeBinaries(t, "ok")
	env, err := kubeenv.Start(startCtx(t), bins)
	require.NoError(t, err)

	// The admin config reaches the API server over verified TLS with the
	// admin token.
	client, err := rest.HTTPClientFor(env.Config())
	require.NoError(t, err)
	resp, err := client.Get(env.Host() + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// So does the kubeconfig.
	kc, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath())
	require.NoError(t, err)
	assert.Equal(t, env.Host(), kc.Host)
	assert.Equal(t, env.Config().BearerToken, kc.BearerToken)
	assert.Equal(t, env.CAPEM(), kc.CAData)

	// The API server got the flags the package promises.
	args, err := os.ReadFile(filepath.Join(state, "apiserver-args"))
	require.NoError(t, err)
	for _, want := range []string{
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + kubeenv.DefaultServiceAccountIssuer,
		"--bind-address=127.0.0.1",
	} {
		assert.Contains(t, string(args), want+"\n")
	}
	for _, flag := range []string{"--service-account-signing-key-file=", "--token-auth-file=", "--tls-cert-file="} {
		assert.Contains(t, string(args), flag+env.Dir())
	}

	etcdPID, apiPID := env.PIDs()
	require.NotZero(t, etcdPID)
	require.NotZero(t, apiPID)
	dir := env.Dir()
	require.DirExists(t, dir)

	require.NoError(t, env.Stop())
	assert.NoDirExists(t, dir)
	assert.ErrorIs(t, syscall.Kill(etcdPID, 0), syscall.ESRCH, "etcd still running")
	assert.ErrorIs(t, syscall.Kill(apiPID, 0), syscall.ESRCH, "kube-apiserver still running")
	assert.NoError(t, env.Stop(), "Stop is idempotent")
}

func TestOptionsReachTheAPIServersCommandLine(t *testing.T) {
	bins, state := fakeBinaries(t, "ok")
	const issuer = "https://issuer.weft.test"
	env, err := kubeenv.Start(startCtx(t), bins, kubeenv.WithServiceAccountIssuer(issuer), kubeenv.WithAPIServerArgs("--v=4", "--service-cluster-ip-range=10.200.0.0/24"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	assert.Equal(t, issuer, env.ServiceAccountIssuer())
	args, err := os.ReadFile(filepath.Join(state, "apiserver-args"))
	require.NoError(t, err)
	assert.Contains(t, string(args), "--service-account-issuer="+issuer+"\n")
	assert.Contains(t, string(args), "--api-audiences="+issuer+"\n")
	// Extra flags come last, so a repeated single-valued flag overrides.
	assert.True(t, strings.HasSuffix(string(args), "--v=4\n--service-cluster-ip-range=10.200.0.0/24\n"), string(args))
}

func TestStartReportsAnEtcdThatExitsWithTheEndOfItsLogAndLeavesNothingBehind(t *testing.T) {
	bins, _ := fakeBinaries(t, "etcd-exits")
	_, err := kubeenv.Start(startCtx(t), bins)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubeenv: etcd did not start")
	assert.Contains(t, err.Error(), "data dir is corrupt")
	assertNoTempDirs(t)
}

// TestStartGivesUpOnAnAPIServerThatNeverGetsReady ends the start by an
// event, not a clock: once the fake API server has answered "not ready"
// twice (so Start has read the first answer: it asks again only after
// that), the test cancels Start's context. Start then gives up, quotes the
// last answer and leaves nothing behind, however slowly a busy machine ran
// the processes up to that point.
func TestStartGivesUpOnAnAPIServerThatNeverGetsReady(t *testing.T) {
	bins, state := fakeBinaries(t, "apiserver-never-ready")
	ctx, cancel := context.WithCancel(startCtx(t))
	defer cancel()
	answers := filepath.Join(state, "readyz-answers")
	go func() {
		defer cancel()
		testutil.Poll(ctx, func() bool {
			b, _ := os.ReadFile(answers)
			return strings.Count(string(b), "\n") >= 2
		})
	}()
	_, err := kubeenv.Start(ctx, bins, kubeenv.WithStartTimeout(time.Minute), kubeenv.WithStopGrace(time.Second))
	require.Error(t, err)
	b, _ := os.ReadFile(answers)
	require.GreaterOrEqual(t, strings.Count(string(b), "\n"), 2, "Start gave up before the API server answered twice: %v", err)
	assert.Contains(t, err.Error(), "kube-apiserver not ready")
	assert.Contains(t, err.Error(), "etcd check failed", "the last readiness answer is in the error")
	assertNoTempDirs(t)
}

// WithStartTimeout alone bounds the start: whichever program it is waiting
// for when the time is up (on a busy machine, maybe still etcd), Start says
// so and cleans up.
func TestStartTimeoutBoundsTheWaitForReadiness(t *testing.T) {
	bins, _ := fakeBinaries(t, "apiserver-never-ready")
	_, err := kubeenv.Start(startCtx(t), bins, kubeenv.WithStartTimeout(time.Second), kubeenv.WithStopGrace(time.Second))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not ready")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assertNoTempDirs(t)
}

func TestStartRetriesWhenAPortIsTakenBeforeTheServerBindsIt(t *testing.T) {
	bins, state := fakeBinaries(t, "port-taken-once")
	env, err := kubeenv.Start(startCtx(t), bins)
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	assert.FileExists(t, filepath.Join(state, "port-taken"), "the first attempt failed")
}

func TestStopKillsAProcessThatIgnoresSIGTERM(t *testing.T) {
	bins, _ := fakeBinaries(t, "ignore-sigterm")
	env, err := kubeenv.Start(startCtx(t), bins, kubeenv.WithStopGrace(500*time.Millisecond))
	require.NoError(t, err)
	_, apiPID := env.PIDs()
	began := time.Now()
	require.NoError(t, env.Stop())
	assert.Less(t, time.Since(began), 10*time.Second)
	assert.ErrorIs(t, syscall.Kill(apiPID, 0), syscall.ESRCH)
}

func TestStopReportsAProcessThatDiedDuringTheTests(t *testing.T) {
	bins, _ := fakeBinaries(t, "ok")
	env, err := kubeenv.Start(startCtx(t), bins)
	require.NoError(t, err)
	etcdPID, _ := env.PIDs()
	require.NoError(t, syscall.Kill(etcdPID, syscall.SIGKILL))
	// Stop must find the process already ended: wait until the Env has
	// seen it end (reaped, its exit recorded), not for a while.
	testutil.Eventually(t, 0, func() bool { return env.Err() != nil }, "the Env noticing that etcd ended")
	assert.ErrorContains(t, env.Err(), "etcd")
	err = env.Stop()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd")
	assert.Contains(t, err.Error(), "had exited before Stop")
	assert.NoDirExists(t, env.Dir())
}

func TestFindBinariesPrefersTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	api := executable(t, dir, "kube-apiserver")
	etcd := executable(t, dir, "etcd")
	t.Setenv(kubeenv.EnvAPIServer, api)
	t.Setenv(kubeenv.EnvEtcd, etcd)
	// A script that would fail proves it is not run.
	script := writeScript(t, dir, "exit 1")
	b, err := kubeenv.FindBinaries(startCtx(t), kubeenv.WithScript(script))
	require.NoError(t, err)
	assert.Equal(t, kubeenv.Binaries{APIServer: api, Etcd: etcd}, b)
}

func TestFindBinariesRejectsAVariableNamingAMissingFile(t *testing.T) {
	t.Setenv(kubeenv.EnvAPIServer, "/nonexistent/kube-apiserver")
	t.Setenv(kubeenv.EnvEtcd, "")
	_, err := kubeenv.FindBinaries(startCtx(t), kubeenv.WithScript(writeScript(t, t.TempDir(), "exit 1")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WEFT_KUBE_APISERVER=/nonexistent/kube-apiserver")
	assert.NotErrorIs(t, err, kubeenv.ErrNoBinaries, "a wrong setting is a configuration error, not a missing binary")
}

func TestFindBinariesRejectsAFileThatIsNotExecutable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "etcd")
	require.NoError(t, os.WriteFile(plain, []byte("not a program"), 0o644))
	t.Setenv(kubeenv.EnvAPIServer, executable(t, dir, "kube-apiserver"))
	t.Setenv(kubeenv.EnvEtcd, plain)
	_, err := kubeenv.FindBinaries(startCtx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WEFT_ETCD="+plain+": not an executable file")
}

func TestFindBinariesAsksTheScriptWhenTheEnvironmentIsSilent(t *testing.T) {
	dir := t.TempDir()
	api := executable(t, dir, "kube-apiserver")
	etcd := executable(t, dir, "etcd")
	t.Setenv(kubeenv.EnvAPIServer, "")
	t.Setenv(kubeenv.EnvEtcd, "")
	script := writeScript(t, dir, fmt.Sprintf(`[ "$1" = env ] || exit 2
echo "building nothing" >&2
echo WEFT_KUBE_APISERVER=%s
echo WEFT_ETCD=%s`, api, etcd))
	b, err := kubeenv.FindBinaries(startCtx(t), kubeenv.WithScript(script))
	require.NoError(t, err)
	assert.Equal(t, kubeenv.Binaries{APIServer: api, Etcd: etcd}, b)
}

func TestFindBinariesWrapsErrNoBinariesWhenTheScriptFails(t *testing.T) {
	t.Setenv(kubeenv.EnvAPIServer, "")
	t.Setenv(kubeenv.EnvEtcd, "")
	script := writeScript(t, t.TempDir(), `echo "go: k8s.io/kubernetes@v1.37.2: proxy unreachable" >&2; exit 1`)
	_, err := kubeenv.FindBinaries(startCtx(t), kubeenv.WithScript(script))
	require.ErrorIs(t, err, kubeenv.ErrNoBinaries)
	assert.Contains(t, err.Error(), "proxy unreachable", "the script's complaint is in the error")
}

func TestStartFailsFastWithoutBinaries(t *testing.T) {
	t.Setenv(kubeenv.EnvAPIServer, "")
	t.Setenv(kubeenv.EnvEtcd, "")
	t.Setenv("TMPDIR", t.TempDir())
	_, err := kubeenv.Start(startCtx(t), kubeenv.WithScript(writeScript(t, t.TempDir(), "exit 7")))
	require.ErrorIs(t, err, kubeenv.ErrNoBinaries)
	assertNoTempDirs(t)
}

func executable(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	return p
}

func writeScript(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "kube-testenv.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755))
	return p
}

// assertNoTempDirs checks that Start left nothing in TMPDIR.
func assertNoTempDirs(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(os.Getenv("TMPDIR"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "temporary state left behind")
}

// runFake is the stand-in for etcd or kube-apiserver, chosen by its flags.
func runFake(args []string) int {
	flags := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	mode := os.Getenv(fakeModeEnv)
	state := os.Getenv(fakeStateEnv)
	term := make(chan os.Signal, 1)
	if mode == "ignore-sigterm" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}

	if cu, ok := flags["listen-client-urls"]; ok { // etcd
		if mode == "etcd-exits" {
			fmt.Println("etcd: fatal: data dir is corrupt (fake)")
			return 3
		}
		u, err := url.Parse(cu)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"health":"true","reason":""}`) })
		go func() { _ = http.Serve(l, mux) }()
		<-term
		return 0
	}

	// kube-apiserver
	var lines strings.Builder
	for _, a := range args {
		lines.WriteString(a + "\n")
	}
	_ = os.WriteFile(filepath.Join(state, "apiserver-args"), []byte(lines.String()), 0o600)
	addr := flags["bind-address"] + ":" + flags["secure-port"]
	if mode == "port-taken-once" {
		marker := filepath.Join(state, "port-taken")
		if _, err := os.Stat(marker); err != nil {
			_ = os.WriteFile(marker, nil, 0o600)
			fmt.Printf("E failed to listen: listen tcp %s: bind: address already in use\n", addr)
			return 1
		}
	}
	tokens, err := os.ReadFile(flags["token-auth-file"])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	token, _, _ := strings.Cut(string(tokens), ",")
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if mode == "apiserver-never-ready" {
			if f, err := os.OpenFile(filepath.Join(state, "readyz-answers"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				_, _ = f.WriteString("not ready\n")
				_ = f.Close()
			}
			http.Error(w, "[-]etcd check failed\nreadyz check failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServeTLS(flags["tls-cert-file"], flags["tls-private-key-file"]); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println(err)
			os.Exit(1)
		}
	}()
	<-term
	return 0
}
