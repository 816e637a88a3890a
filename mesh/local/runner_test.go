package local_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/local"
)

const twoWorkloads = `
namespace: shop
workloads:
- name: api
  ports: [{name: echo, port: 7000}]
- name: web
  calls: [{service: api, localPort: 9001}]
- name: stranger
  calls: [{service: api, localPort: 9002}]
policies:
- workload: api
  port: echo
  allow: [web]
`

// echoApp answers each line with "<pod>: <line>".
func echoApp(ctx context.Context, pod local.Pod) error {
	l, err := net.Listen("tcp", netip.AddrPortFrom(pod.IP, uint16(pod.Ports[0].Port)).String())
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); l.Close() }()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintf(c, "%s: %s\n", pod.Name, sc.Text())
			}
		}()
	}
}

func exchange(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	s, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(s), err
}

func startMesh(t *testing.T, src string, opts ...local.Option) (*local.Runner, context.CancelFunc, chan error) {
	t.Helper()
	f, err := local.Parse("test.yaml", []byte(src))
	require.NoError(t, err)
	r, err := local.New(context.Background(), f, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("mesh stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("mesh not ready within 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("mesh did not stop within 20s")
		}
	})
	return r, cancel, done
}

func TestRunnerCarriesAllowedTrafficOverMutualTLSAndDeniesOthers(t *testing.T) {
	base := netip.MustParseAddr("127.0.123.0")
	r, _, _ := startMesh(t, twoWorkloads, local.WithApp("api", echoApp), local.WithAddressBase(base))
	st := r.State()
	require.NotNil(t, st)
	web, ok := st.Plan.Pod("shop", "web-0")
	require.True(t, ok)
	assert.True(t, netip.PrefixFrom(base, 24).Contains(web.IP), "pods live in the /24 WithAddressBase fixed: %s", web.IP)
	stranger, ok := st.Plan.Pod("shop", "stranger-0")
	require.True(t, ok)

	got, err := exchange(web.Mappings[0].Listen.String(), "hello")
	require.NoError(t, err)
	assert.Equal(t, "api-0: hello", got)

	_, err = exchange(stranger.Mappings[0].Listen.String(), "hello")
	assert.Error(t, err, "the policy allows only web")

	// The api proxy saw web's identity over mutual TLS, and denied the stranger.
	var api *local.Proxy
	for _, p := range st.Proxies {
		if p.Pod.Workload == "api" {
			api = p
		}
	}
	require.NotNil(t, api)
	mfs, err := api.Registry().Gather()
	require.NoError(t, err)
	var allowed, denied string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "inbound_tcp_authz_allow_total":
				allowed += labels["client_id"] + "/" + labels["tls"] + " "
			case "inbound_tcp_authz_deny_total":
				denied += labels["client_id"] + "/" + labels["tls"] + " "
			}
		}
	}
	assert.Contains(t, allowed, "web.shop.serviceaccount.identity.weft.cluster.local/true")
	assert.Contains(t, denied, "stranger.shop.serviceaccount.identity.weft.cluster.local/true")
}

func TestRunnerRemovesItsDirectoryAndStopsListeningWhenCancelled(t *testing.T) {
	tmp := t.TempDir()
	f, err := local.Parse("test.yaml", []byte(twoWorkloads))
	require.NoError(t, err)
	r, err := local.New(context.Background(), f, local.WithTempDir(tmp), local.WithApp("api", echoApp), local.WithShutdownGracePeriod(time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("stopped early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not ready")
	}
	st := r.State()
	entries, _ := os.ReadDir(tmp)
	assert.Len(t, entries, 1, "one temporary directory while running")
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
	entries, _ = os.ReadDir(tmp)
	assert.Empty(t, entries, "the temporary directory is removed")
	for _, p := range st.Proxies {
		_, err := net.DialTimeout("tcp", p.Pod.Inbound.String(), time.Second)
		assert.Error(t, err, "%s inbound still listening", p.Pod.Name)
		_, err = net.DialTimeout("tcp", p.Pod.Admin.String(), time.Second)
		assert.Error(t, err, "%s admin still listening", p.Pod.Name)
	}
	for _, a := range []string{st.ControlPlane.Identity, st.ControlPlane.Destination, st.ControlPlane.Policy} {
		_, err := net.DialTimeout("tcp", a, time.Second)
		assert.Error(t, err, "control plane %s still listening", a)
	}
	_ = io.Discard
}

// TestNewsContextBoundsTheStartOnly: New fails with the error of a context
// that has already ended; the mesh runs for Run's context.
func TestNewsContextBoundsTheStartOnly(t *testing.T) {
	f, err := local.Parse("test.yaml", []byte("namespace: shop\nworkloads:\n- name: api\n  ports: [{name: echo, port: 7000}]\n"))
	require.NoError(t, err)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = local.New(ended, f)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "local: ")
}
