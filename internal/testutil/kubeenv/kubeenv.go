package kubeenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Env is a running etcd and kube-apiserver pair.
type Env struct {
	dir       string
	host      string
	files     files
	issuer    string
	etcdURL   string
	etcd      *process
	apiserver *process
	grace     time.Duration
	logger    *slog.Logger

	stopOnce sync.Once
	stopErr  error
}

// Start finds the binaries (see FindBinaries), starts etcd and then
// kube-apiserver on free loopback ports, and returns once the API server's
// /readyz answers ok. ctx bounds the whole start, including a build of the
// binaries by the script; WithStartTimeout bounds waiting for readiness.
// On error nothing is left running and the temporary directory is removed.
func Start(ctx context.Context, opts ...Option) (*Env, error) {
	c := newConfig(opts)
	bins, err := findBinaries(ctx, &c)
	if err != nil {
		return nil, err
	}
	var errs []error
	for attempt := 1; attempt <= c.attempts; attempt++ {
		e, err := start(ctx, &c, bins)
		if err == nil {
			return e, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
		c.logger.Info("kubeenv: a port was taken between choosing and binding it; retrying", "attempt", attempt)
	}
	return nil, errors.Join(errs...)
}

// New starts an Env for one test, failing t when it cannot start, and stops
// it when t ends. Prefer one Env per package, started in TestMain. Finding
// the binaries may take up to 30 minutes when the script has to build them.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	e, err := Start(ctx, opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return e
}

// errPortTaken marks a start that failed because a chosen port was bound by
// someone else in the meantime; Start retries those.
var errPortTaken = errors.New("kubeenv: port already in use")

func start(ctx context.Context, c *config, bins Binaries) (_ *Env, err error) {
	dir, err := os.MkdirTemp("", "weft-kubeenv-")
	if err != nil {
		return nil, fmt.Errorf("kubeenv: temporary directory: %w", err)
	}
	e := &Env{dir: dir, issuer: c.issuer, grace: c.stopGrace, logger: c.logger}
	defer func() {
		if err != nil {
			if serr := e.Stop(); serr != nil {
				c.logger.Warn("kubeenv: cleanup after failed start", "err", serr)
			}
		}
	}()
	if e.files, err = makeFiles(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, secure := ports[0], ports[1], ports[2]
	e.etcdURL = "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	e.host = "https://127.0.0.1:" + strconv.Itoa(secure)

	readyCtx, cancel := context.WithTimeout(ctx, c.startTimeout)
	defer cancel()

	began := time.Now()
	e.etcd, err = startProcess("etcd", bins.Etcd, etcdArgs(e.files.etcdDataDir, etcdClient, etcdPeer), e.files.etcdLog, c.output)
	if err != nil {
		return nil, err
	}
	if err := waitReady(readyCtx, e.etcd, etcdHealthy(e.etcdURL)); err != nil {
		return nil, err
	}
	c.logger.Info("kubeenv: etcd ready", "url", e.etcdURL, "after", time.Since(began).Round(time.Millisecond))

	began = time.Now()
	args := append(apiserverArgs(e.files, e.etcdURL, secure, c.issuer, c.serviceCIDR), c.extraArgs...)
	e.apiserver, err = startProcess("kube-apiserver", bins.APIServer, args, e.files.apiserverLog, c.output)
	if err != nil {
		return nil, err
	}
	client, err := e.httpClient()
	if err != nil {
		return nil, err
	}
	if err := waitReady(readyCtx, e.apiserver, apiserverReady(client, e.host, e.files.adminToken)); err != nil {
		return nil, err
	}
	c.logger.Info("kubeenv: kube-apiserver ready", "host", e.host, "after", time.Since(began).Round(time.Millisecond))

	if err := e.writeKubeconfig(); err != nil {
		return nil, err
	}
	return e, nil
}

// etcdArgs runs a single-member etcd on loopback with fsync off: the data
// is thrown away with the test.
func etcdArgs(dataDir string, client, peer int) []string {
	cu := "http://127.0.0.1:" + strconv.Itoa(client)
	pu := "http://127.0.0.1:" + strconv.Itoa(peer)
	return []string{
		"--name=kubeenv",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + cu,
		"--advertise-client-urls=" + cu,
		"--listen-peer-urls=" + pu,
		"--initial-advertise-peer-urls=" + pu,
		"--initial-cluster=kubeenv=" + pu,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

// apiserverArgs is kube-apiserver's command line; see the package doc for
// why each setting is there.
func apiserverArgs(f files, etcdURL string, secure int, issuer, serviceCIDR string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(secure),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--token-auth-file=" + f.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + f.saKey,
		"--service-account-signing-key-file=" + f.saKey,
		"--api-audiences=" + issuer,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		"--enable-priority-and-fairness=false",
	}
}

// freePorts reserves n distinct loopback ports and releases them for the
// processes to bind. Another program may take one in between; Start then
// sees errPortTaken and tries again with new ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kubeenv: find a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls ready until it returns nil, the process ends, or ctx
// ends.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if ended, _ := p.exited(); ended {
			err := p.failure("did not start")
			if strings.Contains(p.tail(30), "address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil {
			last = err // the answer cut short by the deadline says nothing
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v): %w", p.failure("not ready: "+ctx.Err().Error()), last, ctx.Err())
		case <-p.done:
		case <-tick.C:
		}
	}
}

func etcdHealthy(base string) func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return func(ctx context.Context) error {
		return probe(ctx, client, base+"/health", "", func(body string) bool {
			return strings.Contains(body, `"health":"true"`)
		})
	}
}

func apiserverReady(client *http.Client, host, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		return probe(ctx, client, host+"/readyz", token, func(body string) bool { return body == "ok" })
	}
}

func probe(ctx context.Context, client *http.Client, url, token string, ok func(string) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !ok(strings.TrimSpace(string(body))) {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, lastLines(string(body), 5))
	}
	return nil
}

func (e *Env) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(e.files.caPEM) {
		return nil, errors.New("kubeenv: serving CA does not parse")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

func (e *Env) writeKubeconfig() error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubeenv"] = &clientcmdapi.Cluster{Server: e.host, CertificateAuthorityData: e.files.caPEM}
	kc.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: e.files.adminToken}
	kc.Contexts["kubeenv"] = &clientcmdapi.Context{Cluster: "kubeenv", AuthInfo: AdminUser, Namespace: "default"}
	kc.CurrentContext = "kubeenv"
	if err := clientcmd.WriteToFile(*kc, e.files.kubeconfig); err != nil {
		return fmt.Errorf("kubeenv: write kubeconfig: %w", err)
	}
	return nil
}

// Config returns a new admin *rest.Config for the API server; callers may
// modify it.
func (e *Env) Config() *rest.Config {
	return &rest.Config{
		Host:            e.host,
		BearerToken:     e.files.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), e.files.caPEM...)},
		QPS:             100,
		Burst:           200,
		UserAgent:       "weft-kubeenv",
	}
}

// Host is the API server's URL, https://127.0.0.1:<port>.
func (e *Env) Host() string { return e.host }

// KubeconfigPath is a kubeconfig file with the admin identity as its
// current context. It is removed by Stop.
func (e *Env) KubeconfigPath() string { return e.files.kubeconfig }

// CAPEM is the CA certificate that signed the API server's serving
// certificate.
func (e *Env) CAPEM() []byte { return append([]byte(nil), e.files.caPEM...) }

// ServiceAccountIssuer is the "iss" of service-account tokens, also the
// API server's audience.
func (e *Env) ServiceAccountIssuer() string { return e.issuer }

// Dir is the temporary directory holding certificates, etcd's data and the
// processes' logs (etcd.log, kube-apiserver.log). Stop removes it.
func (e *Env) Dir() string { return e.dir }

// PIDs returns the process ids of etcd and kube-apiserver.
func (e *Env) PIDs() (etcd, apiserver int) {
	if e.etcd != nil {
		etcd = e.etcd.pid()
	}
	if e.apiserver != nil {
		apiserver = e.apiserver.pid()
	}
	return etcd, apiserver
}

// Err reports the programs that have ended since Start, nil while both
// run; before Stop, that is a crash. A suite can check it to fail early with the
// end of the program's log instead of a string of refused connections.
func (e *Env) Err() error {
	var errs []error
	for _, p := range []*process{e.etcd, e.apiserver} {
		if p == nil {
			continue
		}
		if ended, _ := p.exited(); ended {
			errs = append(errs, p.failure("ended"))
		}
	}
	return errors.Join(errs...)
}

// Stop ends kube-apiserver and then etcd (SIGTERM, SIGKILL after the grace
// period) and removes the temporary directory. It reports a process that
// had exited by itself before Stop. It is idempotent.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		if e.apiserver != nil {
			errs = append(errs, e.apiserver.stop(e.grace, e.logger))
		}
		if e.etcd != nil {
			errs = append(errs, e.etcd.stop(e.grace, e.logger))
		}
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("kubeenv: remove %s: %w", e.dir, err))
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}
