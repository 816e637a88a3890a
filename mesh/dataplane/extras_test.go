package dataplane_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// lockedBuffer collects the access log; the proxy writes from handler
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSuffix(l.b.String(), "\n"), "\n")
}

// inboundWith is a server proxy whose inbound listener pretends every
// connection was redirected to port (as iptables would), with cfg edited
// by edit.
func inboundWith(t *testing.T, port uint16, edit func(*dataplane.Config), opts ...dataplane.Option) (*running, string) {
	t.Helper()
	pk := newPKI(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(port), allowAll(t))
	in := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), nil
	}
	cfg := testConfig()
	if edit != nil {
		edit(&cfg)
	}
	opts = append(opts, dataplane.WithOriginalDestination(orig))
	r := startProxy(t, cfg, pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in}, opts...)
	return r, in.Addr().String()
}

var apacheLine = regexp.MustCompile(`^(127\.0\.0\.1:\d+) (\S+) - \[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)\] "(\S+) (\S+) (\S+)" (\d{3})$`)

func TestAccessLogWritesLinkerdsApacheLineForEachInboundRequest(t *testing.T) {
	app := startHTTPApp(t)
	var log lockedBuffer
	_, addr := inboundWith(t, app.port(), func(c *dataplane.Config) { c.AccessLog = dataplane.AccessLogApache }, dataplane.WithAccessLog(&log))

	resp, _ := rawExchange(t, addr, "GET /status/201?q=1 HTTP/1.1\r\nHost: web\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n")
	require.Equal(t, 201, resp.StatusCode)
	testutil.Eventually(t, 5*time.Second, func() bool { return len(log.lines()) == 1 && log.lines()[0] != "" }, "one line")
	m := apacheLine.FindStringSubmatch(log.lines()[0])
	require.NotNil(t, m, "line %q", log.lines()[0])
	assert.Equal(t, "-", m[2], "a plaintext client has no identity")
	ts, err := time.Parse(time.RFC3339Nano, m[3])
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), ts, time.Minute)
	assert.Equal(t, []string{"GET", "/status/201?q=1", "HTTP/1.1", "201"}, []string{m[5], m[6], m[7], m[8]})
}

func TestAccessLogNamesTheMeshedClientAndItsHTTP1Version(t *testing.T) {
	var log lockedBuffer
	hp := startHTTPPair(t, httpPairOptions{
		cfgB:  func(c *dataplane.Config) { c.AccessLog = dataplane.AccessLogApache },
		optsB: []dataplane.Option{dataplane.WithAccessLog(&log)},
	})
	resp, _ := get(t, h1Client(), hp.url("/status/204"))
	require.Equal(t, 204, resp.StatusCode)
	testutil.Eventually(t, 5*time.Second, func() bool { return log.lines()[0] != "" }, "a line")
	m := apacheLine.FindStringSubmatch(log.lines()[0])
	require.NotNil(t, m, "line %q", log.lines()[0])
	assert.Equal(t, idA, m[2], "the verified client identity")
	assert.Equal(t, "HTTP/1.1", m[7], "the version the client spoke, not the HTTP/2 between proxies")
	assert.Equal(t, "/status/204", m[6])
}

func TestAccessLogWritesLinkerdsJSONFields(t *testing.T) {
	app := startHTTPApp(t)
	var log lockedBuffer
	_, addr := inboundWith(t, app.port(), func(c *dataplane.Config) { c.AccessLog = dataplane.AccessLogJSON }, dataplane.WithAccessLog(&log))

	resp, _ := rawExchange(t, addr, "POST /echo HTTP/1.1\r\nHost: web.shop\r\nUser-Agent: probe/1\r\nX-B3-TraceId: abc123\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
	require.Equal(t, 200, resp.StatusCode)
	testutil.Eventually(t, 5*time.Second, func() bool { return log.lines()[0] != "" }, "a line")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(log.lines()[0]), &got))
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"client.addr", "client.id", "host", "method", "processing_ns", "request_bytes",
		"response_bytes", "status", "timestamp", "total_ns", "trace_id", "uri", "user_agent", "version"}, keys)
	assert.Equal(t, float64(200), got["status"], "status is a number")
	assert.Equal(t, "POST", got["method"])
	assert.Equal(t, "/echo", got["uri"])
	assert.Equal(t, "HTTP/1.1", got["version"])
	assert.Equal(t, "web.shop", got["host"])
	assert.Equal(t, "probe/1", got["user_agent"])
	assert.Equal(t, "abc123", got["trace_id"])
	assert.Equal(t, "5", got["request_bytes"])
	assert.Equal(t, "5", got["response_bytes"])
	assert.Equal(t, "-", got["client.id"])
	total, err := strconv.ParseInt(got["total_ns"].(string), 10, 64)
	require.NoError(t, err)
	processing, err := strconv.ParseInt(got["processing_ns"].(string), 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, total, processing, "processing excludes the wait for the application")
	assert.GreaterOrEqual(t, processing, int64(0))
	assert.True(t, strings.HasPrefix(log.lines()[0], `{"client.addr":`), "keys are sorted, as Linkerd writes them")
}

func TestAccessLogNeedsAWriter(t *testing.T) {
	cfg := testConfig()
	cfg.AccessLog = dataplane.AccessLogJSON
	_, err := dataplane.New(ctxTimeout(t, 5*time.Second), cfg, newPKI(t).identity(t, idB), nil, nil)
	assert.ErrorContains(t, err, "WithAccessLog")
}

func TestRequireIdentityPortsRefuseClientsWithoutMeshIdentity(t *testing.T) {
	app := startEcho(t, "")
	r, addr := inboundWith(t, app.port(), func(c *dataplane.Config) {
		c.RequireIdentityPorts = dataplane.Ports{{First: app.port(), Last: app.port()}}
	})
	_, err := echoOnce(t, addr, opaquePayload)
	assert.Error(t, err, "the policy admits everyone, but the port requires an identity")
	assert.Equal(t, int32(0), app.accepted.Load())
	testutil.Eventually(t, 5*time.Second, func() bool {
		return r.metric(t, "inbound_tcp_authz_deny_total", `tls="no_identity"`, fmt.Sprintf(`target_port="%d"`, app.port())) == 1
	}, "the refusal is counted")

	// Another port of the same pod takes plaintext as its policy says.
	other := startEcho(t, "")
	_, addr2 := inboundWith(t, other.port(), func(c *dataplane.Config) {
		c.RequireIdentityPorts = dataplane.Ports{{First: app.port(), Last: app.port()}}
	})
	got, err := echoOnce(t, addr2, opaquePayload)
	require.NoError(t, err)
	assert.Equal(t, opaquePayload, got)
}

func TestRequireIdentityPortsAdmitMeshedClients(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{})
	port := hp.app.port()
	hp2 := startHTTPPair(t, httpPairOptions{app: hp.app, cfgB: func(c *dataplane.Config) {
		c.RequireIdentityPorts = dataplane.Ports{{First: port, Last: port}}
	}})
	resp, _ := get(t, h1Client(), hp2.url("/status/200"))
	assert.Equal(t, 200, resp.StatusCode)
}

// fullBacklog returns the address of a listener whose accept queue is full
// and never drained: new connection attempts to it get no answer, so a
// dial waits until its timeout.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue; the kernel then drops further SYNs.
	for i := 0; i < 8; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	return addr
}

func TestInboundConnectTimeoutBoundsDiallingTheApplication(t *testing.T) {
	target := fullBacklog(t)
	_, portText, _ := net.SplitHostPort(target)
	port, _ := strconv.Atoi(portText)
	// The outbound timeout is far longer than the client waits; only the
	// inbound one can end the dial before the client gives up.
	_, addr := inboundWith(t, uint16(port), func(c *dataplane.Config) {
		c.ConnectTimeout = time.Hour
		c.InboundConnectTimeout = 200 * time.Millisecond
	})
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufioReader(c), nil)
	require.NoError(t, err, "the proxy answers before the client's deadline")
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
}

func TestConfigReadsTheLinkerdCompatibilityVariables(t *testing.T) {
	env := map[string]string{
		"WEFT_PROXY_INBOUND_CONNECT_TIMEOUT":         "150ms",
		"WEFT_PROXY_OUTBOUND_CONNECT_TIMEOUT":        "3s",
		"WEFT_PROXY_INBOUND_DETECT_TIMEOUT":          "8760h",
		"WEFT_PROXY_OUTBOUND_DETECT_TIMEOUT":         "20s",
		"WEFT_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT": "5s",
		"WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS":  "8080,9000-9100",
		"WEFT_PROXY_ACCESS_LOG":                      "JSON",
		"WEFT_PROXY_CPU_RATIO_LIMIT":                 "0.5",
	}
	cfg, err := dataplane.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, 150*time.Millisecond, cfg.InboundConnectTimeout)
	assert.Equal(t, 3*time.Second, cfg.ConnectTimeout)
	assert.Equal(t, 8760*time.Hour, cfg.InboundDetectTimeout)
	assert.Equal(t, 20*time.Second, cfg.OutboundDetectTimeout)
	assert.Equal(t, 5*time.Second, cfg.DestinationIdleTimeout)
	assert.True(t, cfg.RequireIdentityPorts.Contains(9050))
	assert.Equal(t, dataplane.AccessLogJSON, cfg.AccessLog)
	assert.Equal(t, 0.5, cfg.CPURatioLimit)

	for k, v := range map[string]string{
		"WEFT_PROXY_ACCESS_LOG":                     "common",
		"WEFT_PROXY_CPU_RATIO_LIMIT":                "1.5",
		"WEFT_PROXY_INBOUND_CONNECT_TIMEOUT":        "-1s",
		"WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS": "x",
	} {
		_, err := dataplane.FromEnv(func(name string) (string, bool) {
			if name == k {
				return v, true
			}
			return "", false
		})
		require.Error(t, err, k)
		assert.Contains(t, err.Error(), k)
	}
}

func TestWorkerLimitKeepsAtLeastOneThreadAndNeverRaisesTheCurrentLimit(t *testing.T) {
	assert.Equal(t, 4, dataplane.WorkerLimit(8, 8, 0.5))
	assert.Equal(t, 1, dataplane.WorkerLimit(8, 8, 0.01))
	assert.Equal(t, 2, dataplane.WorkerLimit(16, 2, 0.5), "a CPU limit already lower wins")
	assert.Equal(t, 3, dataplane.WorkerLimit(8, 3, 0), "no ratio, no change")
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
