package proxycmd

import (
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/testutil"

	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func noEnv(string) (string, bool) { return "", false }

func TestProxyRunHelpListsEverySetting(t *testing.T) {
	var out, errb bytes.Buffer
	code := ProxyRunCommand(nil).Run(context.Background(), []string{"--help"}, core.IO{Stdout: &out, Stderr: &errb})
	assert.Equal(t, core.ExitOK, code)
	// Help goes to stdout, as in every cobra command tree.
	for _, s := range ProxySettings() {
		assert.Contains(t, out.String(), s.Env)
		assert.Contains(t, out.String(), "--"+flagName(s.Env)+" ")
	}
	assert.Contains(t, out.String(), "--static")
}

func TestProxyRunRejectsBadSettingsNamingThem(t *testing.T) {
	var errb bytes.Buffer
	env := func(k string) (string, bool) {
		if k == "WEFT_PROXY_DETECT_TIMEOUT" {
			return "soon", true
		}
		return "", false
	}
	code := runProxy(context.Background(), nil, core.IO{Stdout: io.Discard, Stderr: &errb}, env, nil)
	assert.Equal(t, core.ExitUsage, code)
	assert.Contains(t, errb.String(), `WEFT_PROXY_DETECT_TIMEOUT="soon"`)

	errb.Reset()
	code = runProxy(context.Background(), []string{"--log-format", "xml"}, core.IO{Stdout: io.Discard, Stderr: &errb}, noEnv, nil)
	assert.Equal(t, core.ExitUsage, code)
	assert.Contains(t, errb.String(), `WEFT_PROXY_LOG_FORMAT="xml"`)

	errb.Reset()
	code = runProxy(context.Background(), nil, core.IO{Stdout: io.Discard, Stderr: &errb}, noEnv, nil)
	assert.Equal(t, core.ExitUsage, code)
	assert.Contains(t, errb.String(), "--static")
}

func TestProxyRunServesFromAStaticFileUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	const name = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: name})
	testutil.WriteFile(t, filepath.Join(dir, "c.pem"), leaf.ChainPEM)
	testutil.WriteFile(t, filepath.Join(dir, "k.pem"), leaf.KeyPEM)
	testutil.WriteFile(t, filepath.Join(dir, "r.pem"), anchor.CertPEM)
	testutil.WriteFile(t, filepath.Join(dir, "p.yaml"), []byte("identity: {name: "+name+", certificate: c.pem, key: k.pem, trustAnchors: r.pem}\n"))
	admin := testutil.FreePort(t)
	args := []string{
		"--static", filepath.Join(dir, "p.yaml"),
		"--inbound-addr", "127.0.0.1:0", "--outbound-addr", "off",
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", admin),
		"--shutdown-grace-period", "1s", "--log-format", "json",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb testutil.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- runProxy(ctx, args, core.IO{Stdout: io.Discard, Stderr: &errb}, noEnv, nil) }()
	client := &http.Client{Timeout: time.Second}
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", admin))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the proxy becomes ready")
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, core.ExitOK, code, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not stop")
	}
	assert.True(t, strings.Contains(errb.String(), `"msg":"proxy started"`), errb.String())
}

func TestTwoStaticProxiesFormAnHTTPPair(t *testing.T) {
	// The pair docs/dataplane.md shows for scripts and benchmarks.
	dir := t.TempDir()
	const client = "client.default.serviceaccount.identity.linkerd.cluster.local"
	const server = "server.default.serviceaccount.identity.linkerd.cluster.local"
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	for name, id := range map[string]string{"client": client, "server": server} {
		leaf := anchor.Leaf(t, testutil.CertOptions{Name: id})
		testutil.WriteFile(t, filepath.Join(dir, name+".crt"), leaf.ChainPEM)
		testutil.WriteFile(t, filepath.Join(dir, name+".key"), leaf.KeyPEM)
	}
	testutil.WriteFile(t, filepath.Join(dir, "roots.pem"), anchor.CertPEM)

	appLn := testutil.Listen(t)
	app := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s from %s", r.Proto, r.Header.Get("L5d-Client-Id"))
	})}
	go app.Serve(appLn)
	defer app.Close()
	appPort := appLn.Addr().(*net.TCPAddr).Port
	inbound, mapped := testutil.FreePort(t), testutil.FreePort(t)

	testutil.WriteFile(t, filepath.Join(dir, "client.yaml"), []byte(fmt.Sprintf(`identity: {name: %s, certificate: client.crt, key: client.key, trustAnchors: roots.pem}
destinations:
  "app.local:%d":
    - {address: "127.0.0.1:%d", identity: %s, opaqueTransportPort: %d}
`, client, appPort, appPort, server, inbound)))
	testutil.WriteFile(t, filepath.Join(dir, "server.yaml"), []byte(fmt.Sprintf(`identity: {name: %s, certificate: server.crt, key: server.key, trustAnchors: roots.pem}
policies:
  "%d":
    protocol: {detect: {}}
    authorizations:
      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}]
        authentication: {meshTLS: {identities: {identities: [{name: %s}]}}}
`, server, appPort, client)))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func(args ...string) (chan int, *testutil.SyncBuffer) {
		done := make(chan int, 1)
		var errb testutil.SyncBuffer
		go func() { done <- runProxy(ctx, args, core.IO{Stdout: io.Discard, Stderr: &errb}, noEnv, nil) }()
		return done, &errb
	}
	doneS, serverErr := run("--static", filepath.Join(dir, "server.yaml"), "--inbound-addr", fmt.Sprintf("127.0.0.1:%d", inbound),
		"--outbound-addr", "off", "--admin-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--shutdown-grace-period", "1s",
		"--access-log", "apache")
	doneC, _ := run("--static", filepath.Join(dir, "client.yaml"), "--inbound-addr", "off", "--outbound-addr", "off",
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--shutdown-grace-period", "1s",
		"--outbound-mappings", fmt.Sprintf("127.0.0.1:%d=app.local:%d", mapped, appPort))

	c := &http.Client{Timeout: 2 * time.Second}
	var body string
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", mapped))
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode == http.StatusOK
	}, "a request crosses the pair")
	assert.Equal(t, "HTTP/1.1 from "+client, body)
	// The server proxy's access log, on stderr as Linkerd's proxy writes it.
	testutil.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(serverErr.String(), " "+client+` - [`) && strings.Contains(serverErr.String(), `] "GET / HTTP/1.1" 200`+"\n")
	}, "an access-log line names the client and the request")
	cancel()
	for _, d := range []chan int{doneS, doneC} {
		select {
		case code := <-d:
			assert.Equal(t, core.ExitOK, code)
		case <-time.After(10 * time.Second):
			t.Fatal("a proxy did not stop")
		}
	}
}
