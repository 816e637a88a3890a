package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/netns"
)

const (
	idA     = "client.shop.serviceaccount.identity.linkerd.cluster.local"
	idB     = "server.shop.serviceaccount.identity.linkerd.cluster.local"
	idOther = "other.shop.serviceaccount.identity.linkerd.cluster.local"

	addrA    = "10.231.7.1"
	addrB    = "10.231.7.2"
	addr6A   = "fd00:231:7::1"
	addr6B   = "fd00:231:7::2"
	proxyUID = 2102
)

// TestMain doubles as the helper processes the test starts inside the
// namespaces: weft-init and weft-proxy, selected by WEFT_E2E_ROLE.
func TestMain(m *testing.M) {
	switch os.Getenv("WEFT_E2E_ROLE") {
	case "":
		os.Exit(m.Run())
	case "init":
		// Report the credentials weft-init runs with, for the test to check.
		if status, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, l := range strings.Split(string(status), "\n") {
				for _, k := range []string{"Uid:", "CapPrm:", "CapEff:", "CapBnd:", "NoNewPrivs:"} {
					if strings.HasPrefix(l, k) {
						fmt.Println("creds", strings.Join(strings.Fields(l), " "))
					}
				}
			}
		}
		args := strings.Split(os.Getenv("WEFT_E2E_ARGS"), "\x1f")
		os.Exit(proxycmd.InitCommand().Run(context.Background(), args, core.StdIO()))
	case "proxy":
		// Drop to the proxy's user so that weft-init's owner rule applies.
		if err := syscall.Setgroups(nil); err == nil {
			_ = syscall.Setgid(proxyUID)
			if err := syscall.Setuid(proxyUID); err != nil {
				fmt.Fprintln(os.Stderr, "setuid:", err)
				os.Exit(1)
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		os.Exit(proxycmd.ProxyRunCommand(nil).Run(ctx, []string{"--static", os.Getenv("WEFT_E2E_STATIC")}, core.StdIO()))
	}
	os.Exit(2)
}

type pod struct {
	ns    *netns.NS
	proxy *exec.Cmd
	logs  *syncBuffer
	exit  chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestClientInPodAReachesPodBThroughBothProxiesOverMutualTLS(t *testing.T) {
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the end-to-end test needs root, ip and iptables in CI: %v", err)
		}
		t.Skipf("needs root, ip and iptables: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exe, err := os.Executable()
	require.NoError(t, err)

	// Two namespaces joined by a veth pair; nothing else is touched.
	nsA, err := netns.New(ctx, "weft-e2e-a")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, nsA.Delete()) })
	nsB, err := netns.New(ctx, "weft-e2e-b")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, nsB.Delete()) })
	suffix := randHex(3)
	vethA, vethB := "wa"+suffix, "wb"+suffix
	require.NoError(t, netns.Run(ctx, "ip", "link", "add", vethA, "netns", nsA.Name, "type", "veth", "peer", "name", vethB, "netns", nsB.Name))
	for _, c := range []struct {
		ns          *netns.NS
		dev, v4, v6 string
	}{{nsA, vethA, addrA, addr6A}, {nsB, vethB, addrB, addr6B}} {
		// No duplicate address detection: addresses are usable at once.
		require.NoError(t, c.ns.Run(ctx, "sysctl", "-q", "-w", "net.ipv6.conf."+c.dev+".accept_dad=0"))
		require.NoError(t, c.ns.Run(ctx, "ip", "addr", "add", c.v4+"/30", "dev", c.dev))
		require.NoError(t, c.ns.Run(ctx, "ip", "-6", "addr", "add", c.v6+"/64", "dev", c.dev, "nodad"))
		require.NoError(t, c.ns.Run(ctx, "ip", "link", "set", c.dev, "up"))
	}
	for _, c := range []struct {
		ns  *netns.NS
		dev string
	}{{nsA, vethA}, {nsB, vethB}} {
		testutil.Eventually(t, 10*time.Second, func() bool {
			out, err := c.ns.Output(ctx, "ip", "-6", "addr", "show", "dev", c.dev, "tentative")
			return err == nil && strings.TrimSpace(out) == ""
		}, "IPv6 addresses usable in "+c.ns.Name)
	}

	// Run-time PKI and the static inputs of each proxy, readable by the
	// proxy's user.
	dir, err := os.MkdirTemp("", "weft-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	writePod := func(name, id, body string) string {
		leaf := issuer.Leaf(t, testutil.CertOptions{Name: id})
		for file, data := range map[string][]byte{name + ".crt": leaf.ChainPEM, name + ".key": leaf.KeyPEM, "roots.pem": anchor.CertPEM} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, file), data, 0o644))
		}
		path := filepath.Join(dir, name+".yaml")
		content := fmt.Sprintf("identity: {name: %s, certificate: %s.crt, key: %s.key, trustAnchors: roots.pem}\n%s", id, name, name, body)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}
	allow := func(id string) string {
		return fmt.Sprintf(`    protocol: {detect: {}}
    authorizations:
      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}, {net: {ip: {ipv6: {first: 0, last: 0}}, prefixLen: 0}}]
        authentication: {meshTLS: {identities: {identities: [{name: %s}]}}}
`, id)
	}
	staticA := writePod("a", idA, fmt.Sprintf(`destinations:
  "%[1]s:8080": [{address: "%[1]s:8080", identity: %[3]s}]
  "%[1]s:8081": [{address: "%[1]s:8081", identity: %[3]s}]
  "%[1]s:8082": [{address: "%[1]s:8082", identity: %[3]s}]
  "[%[2]s]:8080": [{address: "[%[2]s]:8080", identity: %[3]s}]
`, addrB, addr6B, idB))
	staticB := writePod("b", idB, "policies:\n  \"8080\":\n"+allow(idA)+"  \"8081\":\n"+allow(idOther)+"  \"8082\":\n"+allow(idA))

	// weft-init in both pods (the admin port stays reachable), run as the
	// injector renders it: user 65534, no new privileges, and exactly
	// CAP_NET_ADMIN and CAP_NET_RAW. In pod A it holds them the way a pod
	// does, through file capabilities on its binary (the container runtime
	// keeps them in the bounding and permitted sets, and weft-init hands
	// them to iptables as ambient capabilities); in pod B they are ambient
	// capabilities from the start.
	for _, tool := range []string{"setpriv", "setcap"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the end-to-end test needs %s (util-linux, libcap2-bin) in CI: %v", tool, err)
			}
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	initDir := filepath.Join(dir, "init")
	require.NoError(t, os.Mkdir(initDir, 0o755))
	lockDir := filepath.Join(dir, "run") // the pod's emptyDir at /run
	require.NoError(t, os.Mkdir(lockDir, 0o777))
	require.NoError(t, os.Chmod(lockDir, 0o777))
	copyExe := func(name string) string {
		b, err := os.ReadFile(exe)
		require.NoError(t, err)
		path := filepath.Join(initDir, name)
		require.NoError(t, os.WriteFile(path, b, 0o755))
		return path
	}
	withFileCaps := copyExe("weft-init-filecaps")
	require.NoError(t, netns.Run(ctx, "setcap", "cap_net_admin,cap_net_raw+ep", withFileCaps))
	plain := copyExe("weft-init")
	const initUID = "65534"
	runs := []struct {
		ns   *netns.NS
		argv []string
	}{
		{nsA, []string{"setpriv", "--reuid", initUID, "--regid", initUID, "--clear-groups",
			"--bounding-set", "-all,+net_admin,+net_raw", "--inh-caps", "-all", "--no-new-privs", "--", withFileCaps}},
		{nsB, []string{"setpriv", "--reuid", initUID, "--regid", initUID, "--clear-groups",
			"--bounding-set", "-all,+net_admin,+net_raw", "--inh-caps", "-all,+net_admin,+net_raw",
			"--ambient-caps", "-all,+net_admin,+net_raw", "--no-new-privs", "--", plain}},
	}
	for _, run := range runs {
		cmd := run.ns.Command(ctx, run.argv[0], run.argv[1:]...)
		cmd.Env = append(os.Environ(), "WEFT_E2E_ROLE=init", "XTABLES_LOCKFILE="+filepath.Join(lockDir, "xtables.lock"),
			"WEFT_E2E_ARGS="+strings.Join([]string{"--proxy-uid", fmt.Sprint(proxyUID), "--inbound-ports-to-ignore", "4190,4191"}, "\x1f"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "weft-init: %s", out)
		creds := string(out)
		assert.Contains(t, creds, "creds Uid: "+initUID+" "+initUID, "weft-init ran as user %s", initUID)
		assert.Contains(t, creds, "creds CapEff: 0000000000003000", "exactly CAP_NET_ADMIN and CAP_NET_RAW are effective")
		assert.Contains(t, creds, "creds CapPrm: 0000000000003000")
		assert.Contains(t, creds, "creds CapBnd: 0000000000003000", "and nothing else could be gained")
		assert.Contains(t, creds, "creds NoNewPrivs: 1")
		rules, err := run.ns.Output(ctx, "iptables-save", "-t", "nat")
		require.NoError(t, err)
		require.Contains(t, rules, "-A WEFT_INIT_OUTPUT -m owner --uid-owner 2102 -j RETURN")
		rules6, err := run.ns.Output(ctx, "ip6tables-save", "-t", "nat")
		require.NoError(t, err)
		require.Contains(t, rules6, "-A WEFT_INIT_OUTPUT -m owner --uid-owner 2102 -j RETURN")
	}

	// Without the capabilities, weft-init says what is missing.
	cmd := nsA.Command(ctx, "setpriv", "--reuid", initUID, "--regid", initUID, "--clear-groups",
		"--bounding-set", "-all", "--no-new-privs", "--", plain)
	cmd.Env = append(os.Environ(), "WEFT_E2E_ROLE=init", "WEFT_E2E_ARGS=--proxy-uid\x1f2102")
	out, err := cmd.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "cap_net_admin,cap_net_raw+ep")

	// The application in pod B: an echo server on 8080 and 8081.
	var appConns sync.WaitGroup
	for _, port := range []string{"8080", "8081"} {
		ln, err := nsB.Listen("[::]:" + port)
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close(); appConns.Wait() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				appConns.Add(1)
				go func() { defer appConns.Done(); defer c.Close(); io.Copy(c, c) }()
			}
		}()
	}

	// And an HTTP application on 8082 that reports who called it.
	httpLn, err := nsB.Listen("[::]:8082")
	require.NoError(t, err)
	httpApp := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s client=%s", r.Proto, r.URL.Path, r.Header.Get("L5d-Client-Id"))
	})}
	go httpApp.Serve(httpLn)
	t.Cleanup(func() { httpApp.Close() })

	startProxy := func(ns *netns.NS, static string) *pod {
		p := &pod{ns: ns, logs: &syncBuffer{}, exit: make(chan error, 1)}
		p.proxy = ns.Command(context.Background(), exe)
		p.proxy.Env = append(os.Environ(),
			"WEFT_E2E_ROLE=proxy", "WEFT_E2E_STATIC="+static,
			"WEFT_PROXY_INBOUND_ADDR=[::]:4143", "WEFT_PROXY_OUTBOUND_ADDR=[::]:4140",
			"WEFT_PROXY_ADMIN_ADDR=[::]:4191", "WEFT_PROXY_SHUTDOWN_GRACE_PERIOD=5s",
			"WEFT_PROXY_DETECT_TIMEOUT=5s", "WEFT_PROXY_LOG_LEVEL=debug", "WEFT_PROXY_INBOUND_PORTS=8080")
		p.proxy.Stdout, p.proxy.Stderr = p.logs, p.logs
		require.NoError(t, p.proxy.Start())
		go func() { p.exit <- p.proxy.Wait() }()
		t.Cleanup(func() {
			if p.proxy.ProcessState == nil {
				_ = p.proxy.Process.Kill()
				<-p.exit
			}
			if t.Failed() {
				t.Logf("proxy in %s logged:\n%s", ns.Name, p.logs.String())
			}
		})
		return p
	}
	podA := startProxy(nsA, staticA)
	podB := startProxy(nsB, staticB)
	for _, p := range []*pod{podA, podB} {
		testutil.Eventually(t, 15*time.Second, func() bool {
			code, _ := adminGet(p.ns, "/ready")
			return code == http.StatusOK
		}, "proxy in "+p.ns.Name+" ready")
	}

	// Watch the wire: every frame on pod B's veth.
	capture := startCapture(t, nsB, vethB)

	secret := "weft-e2e-secret-" + randHex(8)
	for _, target := range []string{addrB + ":8080", "[" + addr6B + "]:8080"} {
		got, err := echoFrom(ctx, nsA, target, secret)
		require.NoError(t, err, "echo through both proxies to %s", target)
		assert.Equal(t, secret, got)
	}
	// HTTP through transparent capture: requests are proxied one by one,
	// cross the mesh over HTTP/2 and mutual TLS, and arrive as HTTP/1 with
	// the verified client identity.
	hc, err := nsA.Dial(ctx, addrB+":8082")
	require.NoError(t, err)
	_ = hc.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(hc)
	for i := 0; i < 2; i++ {
		_, err = fmt.Fprintf(hc, "GET /hello HTTP/1.1\r\nHost: b\r\nX-Secret: %s\r\n\r\n", secret)
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "HTTP/1.1 /hello client="+idA, string(body))
	}
	hc.Close()
	wire := capture.stop()
	assert.Greater(t, len(wire), 0, "traffic crossed the veth")
	assert.True(t, bytes.Contains(wire, []byte{0x16, 0x03}), "a TLS handshake crossed the veth")
	assert.False(t, bytes.Contains(wire, []byte(secret)), "the payload never crossed the veth in the clear")

	metricB := metrics(t, nsB)
	clientA := fmt.Sprintf(`client_id="%s"`, idA)
	assert.Equal(t, 3.0, sample(metricB, "tcp_open_total", `direction="inbound"`, `peer="src"`, clientA, `tls="true"`),
		"two echo connections, one multiplexed HTTP connection")
	assert.Equal(t, 2.0, sample(metricB, "inbound_tcp_authz_allow_total", `authz_kind="serverauthorization"`, `authz_name="static-8080-0"`,
		clientA, `target_port="8080"`, `tls="true"`))
	assert.Equal(t, 2.0, sample(metricB, "inbound_http_authz_allow_total", `authz_kind="serverauthorization"`, `authz_name="static-8082-0"`,
		clientA, `route_kind="default"`, `route_name="default"`, `target_port="8082"`, `tls="true"`))
	metricA := metrics(t, nsA)
	serverB := fmt.Sprintf(`server_id="%s"`, idB)
	assert.Equal(t, 2.0, sample(metricA, "request_total", `direction="outbound"`, fmt.Sprintf(`target_addr="%s:8082"`, addrB), serverB, `tls="true"`))
	assert.Equal(t, 3.0, sample(metricA, "tcp_open_total", `direction="outbound"`, `peer="dst"`, serverB, `tls="true"`),
		"two echo connections and one pooled HTTP/2 connection to B's proxy")

	// A policy that does not admit A: the connection fails.
	_, err = echoFrom(ctx, nsA, addrB+":8081", "denied?")
	assert.Error(t, err, "the denied connection fails")
	testutil.Eventually(t, 5*time.Second, func() bool {
		return sample(metrics(t, nsB), "inbound_tcp_authz_deny_total", fmt.Sprintf(`client_id="%s"`, idA), `target_port="8081"`, `tls="true"`) == 1
	}, "pod B counts the denial with A's identity")

	// SIGTERM drains: ready goes false, the open connection keeps working,
	// the proxy exits once it is closed.
	held, err := nsA.Dial(ctx, addrB+":8080")
	require.NoError(t, err)
	defer held.Close()
	_ = held.SetDeadline(time.Now().Add(20 * time.Second))
	require.NoError(t, roundTrip(held, "before-sigterm"))
	require.NoError(t, podB.proxy.Process.Signal(syscall.SIGTERM))
	testutil.Eventually(t, 5*time.Second, func() bool {
		code, _ := adminGet(nsB, "/ready")
		return code == http.StatusServiceUnavailable
	}, "pod B reports not ready while draining")
	_, err = echoFrom(ctx, nsA, addrB+":8080", "new connection")
	assert.Error(t, err, "no new connection is accepted while draining")
	assert.NoError(t, roundTrip(held, "during-drain"), "the open connection still works")
	select {
	case err := <-podB.exit:
		t.Fatalf("proxy exited before its connection closed: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	held.Close()
	select {
	case err := <-podB.exit:
		assert.NoError(t, err, "the proxy exits cleanly after draining")
	case <-time.After(10 * time.Second):
		t.Fatal("pod B's proxy did not exit after draining")
	}
	assert.Contains(t, podB.logs.String(), "draining")

	// weft-init --cleanup, as the same non-root user, leaves no rule
	// behind.
	cmd = nsA.Command(ctx, runs[1].argv[0], runs[1].argv[1:]...)
	cmd.Env = append(os.Environ(), "WEFT_E2E_ROLE=init", "XTABLES_LOCKFILE="+filepath.Join(lockDir, "xtables.lock"), "WEFT_E2E_ARGS=--cleanup")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	rules, err := nsA.Output(ctx, "iptables-save", "-t", "nat")
	require.NoError(t, err)
	assert.NotContains(t, rules, "WEFT_")
}

// roundTrip sends msg through the echo application and checks the echo.
// The message starts with a binary byte, as a client-first binary
// protocol's would: detection then knows at once it is no HTTP (text made
// of token characters only could still become a request line, and waits
// for a line end or the detect timeout).
func roundTrip(c net.Conn, msg string) error {
	msg = "\x00" + msg
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echo %q, want %q", buf, msg)
	}
	return nil
}

func echoFrom(ctx context.Context, ns *netns.NS, addr, msg string) (string, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := ns.Dial(dctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := roundTrip(c, msg); err != nil {
		return "", err
	}
	return msg, nil
}

func adminGet(ns *netns.NS, path string) (int, string) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ns.Dial(ctx, "127.0.0.1:4191") },
	}}
	resp, err := client.Get("http://admin" + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func metrics(t *testing.T, ns *netns.NS) string {
	code, body := adminGet(ns, "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	var keep []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "tcp_") || strings.HasPrefix(l, "inbound_") || strings.HasPrefix(l, "request_total") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// sample sums the samples of name whose line carries every one of labels;
// -1 when none does.
func sample(body, name string, labels ...string) float64 {
	sum, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			var v float64
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
			found = true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// capture reads every frame of one interface through an AF_PACKET socket.
type capture struct {
	fd   int
	mu   sync.Mutex
	data []byte
	done chan struct{}
	quit chan struct{}
}

func startCapture(t *testing.T, ns *netns.NS, dev string) *capture {
	c := &capture{done: make(chan struct{}), quit: make(chan struct{})}
	proto := int(htons(unix.ETH_P_ALL))
	err := ns.Do(func() error {
		iface, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: iface.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return err
		}
		c.fd = fd
		return nil
	})
	require.NoError(t, err)
	go func() {
		defer close(c.done)
		defer unix.Close(c.fd)
		buf := make([]byte, 65536)
		for {
			select {
			case <-c.quit:
				return
			default:
			}
			n, _, err := unix.Recvfrom(c.fd, buf, 0)
			if err == nil && n > 0 {
				c.mu.Lock()
				if len(c.data) < 64<<20 {
					c.data = append(c.data, buf[:n]...)
				}
				c.mu.Unlock()
			}
		}
	}()
	return c
}

func (c *capture) stop() []byte {
	close(c.quit)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
