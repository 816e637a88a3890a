package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The world of `weftbench attack`: a run-time PKI, an application served
// in this process (HTTP/1.1, h2c and gRPC health on one port, so that
// HTTP/2 and gRPC victims share the proxies' pooled connections with an
// attacker),
// and a pair of real weft-proxy processes started from static files:
//
//	victim/attacker -> weft-c (outbound mappings, plaintext) -> mesh TLS -> weft-s (inbound) -> app
//	attacker (peer, mesh TLS + transport header)            -> weft-s (inbound) -> app
//	tapper (mTLS)                                           -> weft-s (tap port)

// Identities of the bench's workloads.
const (
	atkClientID   = "client.bench.serviceaccount.identity.linkerd.cluster.local"
	atkServerID   = "server.bench.serviceaccount.identity.linkerd.cluster.local"
	atkAttackerID = "attacker.bench.serviceaccount.identity.linkerd.cluster.local"
	atkTapperID   = "tapper.bench.serviceaccount.identity.linkerd.cluster.local"
)

// attackEnv is what every attack and victim reaches.
type attackEnv struct {
	dir      string
	proxyBin string
	roots    *x509.CertPool
	certs    map[string]tls.Certificate // by file name: client, server, attacker, tapper

	appHTTP       int // the application's port
	appAttackReqs atomic.Int64

	// Ports of the proxies, fixed for the run (each attack gets fresh
	// processes on the same ports).
	sIn, sAdmin, sTap int
	cH1, cAdmin       int

	// attackerSrc is the source address of every attacker connection:
	// one hostile host, not the victims' 127.0.0.1, so that limits per
	// client address (the tap's handshake stage, the HTTP/1.1 pool's
	// per-client share) see two clients, as they would in a cluster.
	attackerSrc net.IP

	stopApp func()

	// childAttacker: attacks run in a child process (attack_proc.go),
	// under taskset -c attackerCPUs when that is set. remote: this is
	// that child, without the application's counters.
	childAttacker bool
	attackerCPUs  string
	remote        bool
}

// attackerDialer dials from the attacker's source address.
func (e *attackEnv) attackerDialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: e.attackerSrc}}
}

func (e *attackEnv) webAuthority() string {
	return "web.bench.svc.cluster.local:" + strconv.Itoa(e.appHTTP)
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// meshTLS is a mesh client configuration presenting the certificate of
// file (client, attacker or tapper), expecting the server proxy.
func (e *attackEnv) meshTLS(file string, alpn ...string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{e.certs[file]},
		RootCAs:      e.roots,
		ServerName:   atkServerID,
		NextProtos:   alpn,
	}
}

// newAttackEnv makes the PKI and the static files and starts the
// application. Ports are picked free on 127.0.0.1.
func newAttackEnv(dir, proxyBin string, attackerSrc net.IP) (*attackEnv, error) {
	e := &attackEnv{dir: dir, proxyBin: proxyBin, certs: map[string]tls.Certificate{}, attackerSrc: attackerSrc}
	pkiDir := filepath.Join(dir, "pki")
	err := runPKI(context.Background(), []string{"-out", pkiDir,
		"-name", "client=" + atkClientID, "-name", "server=" + atkServerID,
		"-name", "attacker=" + atkAttackerID, "-name", "tapper=" + atkTapperID}, io.Discard)
	if err != nil {
		return nil, err
	}
	rootsPEM, err := os.ReadFile(filepath.Join(pkiDir, "roots.pem"))
	if err != nil {
		return nil, err
	}
	e.roots = x509.NewCertPool()
	e.roots.AppendCertsFromPEM(rootsPEM)
	for _, f := range []string{"client", "server", "attacker", "tapper"} {
		c, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, f+".crt"), filepath.Join(pkiDir, f+".key"))
		if err != nil {
			return nil, err
		}
		e.certs[f] = c
	}
	if err := e.startApp(); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		e.stopApp()
		return nil, err
	}
	e.sIn, e.sAdmin, e.sTap, e.cH1, e.cAdmin = ports[0], ports[1], ports[2], ports[3], ports[4]

	authz := fmt.Sprintf(`    protocol: {detect: {timeout: 10s}}
    authorizations:
      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}]
        authentication: {meshTLS: {identities: {identities: [{name: %s}, {name: %s}]}}}
`, atkClientID, atkAttackerID)
	server := fmt.Sprintf("identity: {name: %s, certificate: %s/server.crt, key: %s/server.key, trustAnchors: %s/roots.pem}\npolicies:\n  \"%d\":\n%s",
		atkServerID, pkiDir, pkiDir, pkiDir, e.appHTTP, authz)
	client := fmt.Sprintf(`identity: {name: %s, certificate: %s/client.crt, key: %s/client.key, trustAnchors: %s/roots.pem}
destinations:
  %q:
    - {address: "127.0.0.1:%d", identity: %s, opaqueTransportPort: %d}
`, atkClientID, pkiDir, pkiDir, pkiDir, e.webAuthority(), e.appHTTP, atkServerID, e.sIn)
	for name, text := range map[string]string{"weft-server.yaml": server, "weft-client.yaml": client} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			e.stopApp()
			return nil, err
		}
	}
	return e, nil
}

// freePorts returns n distinct ports free on 127.0.0.1 now (the proxies
// bind them a moment later).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startApp serves the application on one port: gRPC's health service
// (requests with a gRPC content type), any path with ?bytes=N (N bytes,
// at most 16 MiB), any other request a small body after reading the
// request body to its end. Requests whose path starts with /attack/ are
// counted: they are the attacker's that reached the application.
func (e *attackEnv) startApp() error {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.appHTTP = hl.Addr().(*net.TCPAddr).Port
	gs := grpc.NewServer()
	hsrv := health.NewServer()
	hsrv.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hsrv)
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				gs.ServeHTTP(w, r)
				return
			}
			if strings.HasPrefix(r.URL.Path, "/attack/") {
				e.appAttackReqs.Add(1)
			}
			_, _ = io.Copy(io.Discard, r.Body)
			n := len(body)
			if v := r.URL.Query().Get("bytes"); v != "" {
				if b, err := strconv.Atoi(v); err == nil && b >= 0 && b <= 16<<20 {
					n = b
				}
			} else {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(n))
			for n > 0 {
				k := min(n, len(chunk))
				if _, err := w.Write(chunk[:k]); err != nil {
					return
				}
				n -= k
			}
		}),
		Protocols:         protos,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	done := make(chan struct{})
	go func() { _ = hs.Serve(hl); close(done) }()
	e.stopApp = func() {
		_ = hs.Close()
		gs.Stop()
		<-done
	}
	return nil
}

// proxyProc is one running weft-proxy.
type proxyProc struct {
	name  string
	cmd   *exec.Cmd
	admin string
	log   string
	done  chan struct{}
}

func (p *proxyProc) pid() int { return p.cmd.Process.Pid }

// startProxies starts a fresh server proxy and client proxy and waits
// until both are ready.
func (e *attackEnv) startProxies() (s, c *proxyProc, err error) {
	s, err = e.startProxy("weft-s", e.sAdmin, "run", "--static", filepath.Join(e.dir, "weft-server.yaml"),
		"--inbound-addr", addr(e.sIn), "--outbound-addr", "off", "--admin-addr", addr(e.sAdmin),
		"--inbound-ports", strconv.Itoa(e.appHTTP),
		"--tap-addr", addr(e.sTap), "--tap-identities", atkTapperID, "--shutdown-grace-period", "1s")
	if err != nil {
		return nil, nil, err
	}
	c, err = e.startProxy("weft-c", e.cAdmin, "run", "--static", filepath.Join(e.dir, "weft-client.yaml"),
		"--inbound-addr", "off", "--outbound-addr", "off", "--admin-addr", addr(e.cAdmin),
		"--outbound-mappings", addr(e.cH1)+"="+e.webAuthority(),
		"--shutdown-grace-period", "1s")
	if err != nil {
		s.stop()
		return nil, nil, err
	}
	return s, c, nil
}

func (e *attackEnv) startProxy(name string, admin int, args ...string) (*proxyProc, error) {
	logPath := filepath.Join(e.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.proxyBin, args...)
	cmd.Env = os.Environ()
	if _, ok := os.LookupEnv("WEFT_PROXY_LOG_LEVEL"); !ok {
		cmd.Env = append(cmd.Env, "WEFT_PROXY_LOG_LEVEL=warn") // WEFT_PROXY_LOG_LEVEL=debug with -keep shows why a proxy closed a connection
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proxyProc{name: name, cmd: cmd, admin: addr(admin), log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start:\n%s", name, firstLines(logPath, 20))
		default:
		}
		if resp, err := hc.Get("http://" + p.admin + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready after 20 s:\n%s", name, firstLines(logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits up to 5 s, then kills.
func (p *proxyProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// errStopped reports that an attacker's window ended.
var errStopped = errors.New("attack window ended")
