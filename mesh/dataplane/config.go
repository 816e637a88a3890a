package dataplane

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/dataplane/internal/envcheck"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/dataplane/iptables"
)

// ParseIdentities reads a comma-separated list of identity names (the
// tappers' list), each a DNS-like name; empty entries are skipped.
func ParseIdentities(s string) ([]string, error) {
	var out []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.ToLower(strings.TrimSpace(id)); id == "" {
			continue
		}
		if err := envcheck.DNSName(id); err != nil {
			return nil, fmt.Errorf("identity %q: %w", id, err)
		}
		out = append(out, id)
	}
	return out, nil
}

// Config holds the settings New, Listen and Run use: listeners, ports,
// policy defaults, timeouts and limits. FromEnv fills it from the
// WEFT_PROXY_* environment variables the injector sets; DefaultConfig gives
// the defaults. An empty listener address turns that listener off. The
// control plane's addresses and the workload's identity are not here: they
// are mesh/dataplane/control's Config, which Connect reads; the log level
// and format belong to the program that builds the logger (WithLogger).
type Config struct {
	InboundAddr  string // WEFT_PROXY_INBOUND_ADDR, 0.0.0.0:4143
	OutboundAddr string // WEFT_PROXY_OUTBOUND_ADDR, 127.0.0.1:4140 (transparent)
	AdminAddr    string // WEFT_PROXY_ADMIN_ADDR, 0.0.0.0:4191

	// Explicit outbound mode, for hosts without iptables.
	ConnectAddr string    // WEFT_PROXY_OUTBOUND_CONNECT_ADDR: HTTP CONNECT listener, off by default
	Mappings    []Mapping // WEFT_PROXY_OUTBOUND_MAPPINGS: "127.0.0.1:9000=web.shop.svc.cluster.local:8080,..."

	// Ports.
	InboundPorts       Ports // WEFT_PROXY_INBOUND_PORTS: application ports whose policy is fetched at startup
	InboundOpaquePorts Ports // WEFT_PROXY_INBOUND_OPAQUE_PORTS: no protocol detection
	InboundSkipPorts   Ports // WEFT_PROXY_INBOUND_SKIP_PORTS: never proxied
	OutboundSkipPorts  Ports // WEFT_PROXY_OUTBOUND_SKIP_PORTS: never proxied

	// Inbound forwarding and policy.
	InboundForwardHost   string         // WEFT_PROXY_INBOUND_FORWARD_HOST, 127.0.0.1
	DefaultInboundPolicy string         // WEFT_PROXY_DEFAULT_INBOUND_POLICY, all-unauthenticated
	ClusterNetworks      []netip.Prefix // WEFT_PROXY_CLUSTER_NETWORKS

	// Timeouts.
	DetectTimeout       time.Duration // WEFT_PROXY_DETECT_TIMEOUT, 10s
	ConnectTimeout      time.Duration // WEFT_PROXY_CONNECT_TIMEOUT, 1s
	ResolveTimeout      time.Duration // WEFT_PROXY_RESOLVE_TIMEOUT, 3s
	PolicyTimeout       time.Duration // WEFT_PROXY_POLICY_TIMEOUT, 10s
	ShutdownGracePeriod time.Duration // WEFT_PROXY_SHUTDOWN_GRACE_PERIOD, 120s

	// HTTP.
	HTTPIdleTimeout        time.Duration // WEFT_PROXY_HTTP_IDLE_TIMEOUT, 60s: idle client connection between requests
	HTTPHeaderTimeout      time.Duration // WEFT_PROXY_HTTP_HEADER_TIMEOUT, 10s: reading one HTTP/1 request head
	HTTPMaxHeaderBytes     int           // WEFT_PROXY_HTTP_MAX_HEADER_BYTES, 65536: request head / HTTP/2 header list
	H2MaxConcurrentStreams uint32        // WEFT_PROXY_HTTP2_MAX_CONCURRENT_STREAMS, 100 per connection
	H2StreamWindow         int32         // WEFT_PROXY_HTTP2_STREAM_WINDOW, 1 MiB receive window per stream
	H2InitialStreamWindow  int32         // WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW, 256 KiB (0: that, or H2StreamWindow if smaller): where a response stream's window starts on the proxy's HTTP/2 client connections; it grows to H2StreamWindow as the response is read
	H2ConnectionWindow     int32         // WEFT_PROXY_HTTP2_CONNECTION_WINDOW, 4 MiB receive window per connection
	H2ResetBudget          int           // WEFT_PROXY_HTTP2_RESET_BUDGET, 100: premature stream resets a connection may cause before the ratio check closes it
	H2BufferLimit          int64         // WEFT_PROXY_HTTP2_BUFFER_LIMIT, 0: 2 x H2ConnectionWindow (8 MiB): unread body bytes one HTTP/2 connection holds, past which the body waiting longest is dropped
	H2WriteTimeout         time.Duration // WEFT_PROXY_HTTP2_WRITE_TIMEOUT, 10s: one write to an HTTP/2 client; a client not reading longer is closed (0: 10s)

	// HTTPPoolWaitTimeout (WEFT_PROXY_HTTP_POOL_WAIT_TIMEOUT, 3s; zero
	// means the default) bounds how long a request waits for a pooled
	// HTTP/1.1 connection to a peer proxy; past it the proxy answers 503
	// with l5d-proxy-error "pool-timeout" (internal/upstream).
	HTTPPoolWaitTimeout time.Duration

	// Admin.
	AdminShutdown       bool          // WEFT_PROXY_ADMIN_SHUTDOWN: enable POST /shutdown from loopback
	AdminHeaderTimeout  time.Duration // WEFT_PROXY_ADMIN_HEADER_TIMEOUT, 5s: reading one admin request
	AdminIdleTimeout    time.Duration // WEFT_PROXY_ADMIN_IDLE_TIMEOUT, 30s: an idle keep-alive admin connection
	AdminMaxConnections int           // WEFT_PROXY_ADMIN_MAX_CONNECTIONS, 500: admin connections open at once (16 per client address)

	// Tap (io.linkerd.proxy.tap), served over mutual TLS to the listed
	// identities only.
	TapAddr               string   // WEFT_PROXY_TAP_ADDR, 0.0.0.0:4190; opened only when TapIdentities is set
	TapIdentities         []string // WEFT_PROXY_TAP_IDENTITIES: identities accepted as tappers; empty turns tap off
	TapMaxTaps            int      // WEFT_PROXY_TAP_MAX_TAPS, 16: taps open at once
	TapMaxEventsPerSecond int      // WEFT_PROXY_TAP_MAX_EVENTS_PER_SECOND, 1000: events per second one tap receives

	// Hostile peers (issue 27): the tap listener's handshake bound, and
	// the application ports the inbound may forward to.
	TapHandshakeTimeout time.Duration // WEFT_PROXY_TAP_HANDSHAKE_TIMEOUT, 3s: a tap client's TLS handshake, before it may hold a connection slot
	InboundPortsOnly    bool          // WEFT_PROXY_INBOUND_PORTS_ONLY, false: the inbound forwards only to InboundPorts (false: to any port but the proxy's own and the skip ports)

	// OutboundSendBuffer (WEFT_PROXY_OUTBOUND_SEND_BUFFER, 262144 bytes;
	// 0 leaves it to the kernel) is the kernel send buffer of each
	// connection the local application opens to the outbound listeners.
	// The kernel grows an unset buffer to 4 MiB (net.ipv4.tcp_wmem) for
	// a client that does not read, so each abandoned download pulled
	// that much more through both proxies; the application is on
	// loopback, where a smaller buffer costs no throughput.
	OutboundSendBuffer int

	// Per-direction settings and Linkerd's optional proxy behaviour; see
	// config_extra.go. Zero values fall back to the settings above.
	Extras
}

// The bounds of Config.OutboundSendBuffer: the kernel's own floor
// (SOCK_MIN_SNDBUF is about 4.5 KiB) and a ceiling far above any
// loopback need.
const (
	minSendBuffer = 4 << 10
	maxSendBuffer = 64 << 20
)

// Mapping is a static explicit-mode outbound listener: connections to Listen
// go to Authority.
type Mapping struct {
	Listen    string
	Authority string
}

// DefaultConfig returns the defaults every setting has.
func DefaultConfig() Config {
	return Config{
		InboundAddr:            "0.0.0.0:4143",
		OutboundAddr:           "127.0.0.1:4140",
		AdminAddr:              "0.0.0.0:4191",
		InboundForwardHost:     "127.0.0.1",
		DefaultInboundPolicy:   AllUnauthenticated,
		ClusterNetworks:        vocab.DefaultClusterNetworks(),
		DetectTimeout:          10 * time.Second,
		ConnectTimeout:         time.Second,
		ResolveTimeout:         3 * time.Second,
		PolicyTimeout:          10 * time.Second,
		ShutdownGracePeriod:    120 * time.Second,
		HTTPIdleTimeout:        time.Minute,
		HTTPHeaderTimeout:      10 * time.Second,
		HTTPMaxHeaderBytes:     64 << 10,
		H2MaxConcurrentStreams: 100,
		H2StreamWindow:         1 << 20,
		H2InitialStreamWindow:  256 << 10,
		H2ConnectionWindow:     4 << 20,
		H2ResetBudget:          100,
		HTTPPoolWaitTimeout:    upstream.DefaultWaitTimeout,
		H2WriteTimeout:         10 * time.Second,
		AdminHeaderTimeout:     5 * time.Second,
		AdminIdleTimeout:       30 * time.Second,
		AdminMaxConnections:    500,
		TapAddr:                "0.0.0.0:4190",
		TapMaxTaps:             tap.DefaultMaxTaps,
		TapMaxEventsPerSecond:  tap.DefaultEventsPerSec,
		TapHandshakeTimeout:    tap.DefaultHandshakeTimeout,
		OutboundSendBuffer:     256 << 10,
	}
}

// Setting documents one environment variable.
type Setting struct {
	Env     string
	Default string
	Help    string
}

// Settings lists every environment variable FromEnv reads, in the order the
// documentation and --help show them.
func Settings() []Setting {
	return append([]Setting{
		{"WEFT_PROXY_INBOUND_ADDR", "0.0.0.0:4143", "inbound listener (connections redirected to the pod, and proxy-to-proxy traffic)"},
		{"WEFT_PROXY_OUTBOUND_ADDR", "127.0.0.1:4140", "transparent outbound listener (original destination from SO_ORIGINAL_DST); empty or off disables"},
		{"WEFT_PROXY_ADMIN_ADDR", "0.0.0.0:4191", "admin server: /live, /ready, /metrics, /shutdown"},
		{"WEFT_PROXY_OUTBOUND_CONNECT_ADDR", "", "explicit mode: HTTP CONNECT proxy listener (off when empty)"},
		{"WEFT_PROXY_OUTBOUND_MAPPINGS", "", "explicit mode: comma-separated LISTEN=AUTHORITY static listeners, e.g. 127.0.0.1:9000=web.shop.svc.cluster.local:8080"},
		{"WEFT_PROXY_INBOUND_PORTS", "", "application ports whose inbound policy is fetched at startup (readiness waits for them)"},
		{"WEFT_PROXY_INBOUND_OPAQUE_PORTS", "", "inbound ports that skip protocol detection (ports and ranges, e.g. 25,3306,9000-9100)"},
		{"WEFT_PROXY_INBOUND_SKIP_PORTS", "", "inbound ports never proxied (weft-init leaves them alone; the proxy refuses them)"},
		{"WEFT_PROXY_OUTBOUND_SKIP_PORTS", "", "outbound ports never proxied"},
		{"WEFT_PROXY_INBOUND_FORWARD_HOST", "127.0.0.1", "address the inbound proxy connects to for the application"},
		{"WEFT_PROXY_DEFAULT_INBOUND_POLICY", "all-unauthenticated", "policy for ports without a policy source: all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny, audit"},
		{"WEFT_PROXY_CLUSTER_NETWORKS", prefixList(vocab.DefaultClusterNetworks()), "networks the cluster-* default policies trust"},
		{"WEFT_PROXY_DETECT_TIMEOUT", "10s", "protocol detection timeout; a client that sent nothing by then, or only the start of an HTTP request (inbound), is closed"},
		{"WEFT_PROXY_CONNECT_TIMEOUT", "1s", "timeout for dialling an endpoint or the application"},
		{"WEFT_PROXY_RESOLVE_TIMEOUT", "3s", "how long a new destination lookup may take before the connection fails"},
		{"WEFT_PROXY_POLICY_TIMEOUT", "10s", "how long an inbound connection waits for its port's first policy before it is refused"},
		{"WEFT_PROXY_SHUTDOWN_GRACE_PERIOD", "120s", "how long open connections may drain after SIGTERM"},
		{"WEFT_PROXY_HTTP_IDLE_TIMEOUT", "60s", "how long an HTTP client connection may stay idle between requests"},
		{"WEFT_PROXY_HTTP_HEADER_TIMEOUT", "10s", "how long reading one HTTP/1 request head may take"},
		{"WEFT_PROXY_HTTP_MAX_HEADER_BYTES", "65536", "largest HTTP/1 request head and HTTP/2 header list accepted (431 beyond)"},
		{"WEFT_PROXY_HTTP2_MAX_CONCURRENT_STREAMS", "100", "concurrent HTTP/2 streams a client connection may open"},
		{"WEFT_PROXY_HTTP2_STREAM_WINDOW", "1048576", "HTTP/2 receive window per stream, bytes"},
		{"WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW", "262144", "where the window of a response stream the proxy receives starts, bytes; it grows to WEFT_PROXY_HTTP2_STREAM_WINDOW as the response is read"},
		{"WEFT_PROXY_HTTP2_CONNECTION_WINDOW", "4194304", "HTTP/2 receive window per connection, bytes"},
		{"WEFT_PROXY_HTTP_POOL_WAIT_TIMEOUT", "3s", "how long an HTTP/1 request waits for a pooled connection to a peer proxy (all busy, or its client's share of them) before it is answered 503"},
		{"WEFT_PROXY_HTTP2_RESET_BUDGET", "100", "premature stream resets (sent or received, of streams under a second old) an HTTP/2 connection may see before it is closed when at least half its streams were reset so"},
		{"WEFT_PROXY_HTTP2_BUFFER_LIMIT", "0", "unread request or response body bytes one HTTP/2 connection may hold (its streams together), past which the body unread longest is dropped and its stream reset; 0: twice WEFT_PROXY_HTTP2_CONNECTION_WINDOW"},
		{"WEFT_PROXY_HTTP2_WRITE_TIMEOUT", "10s", "one write to an HTTP/2 client; a client that does not read for longer is closed"},
		{"WEFT_PROXY_ADMIN_SHUTDOWN", "false", "enable POST /shutdown on the admin server (loopback clients that reach it directly only)"},
		{"WEFT_PROXY_ADMIN_HEADER_TIMEOUT", "5s", "how long an admin client may take to send a whole request"},
		{"WEFT_PROXY_ADMIN_IDLE_TIMEOUT", "30s", "how long an admin keep-alive connection may stay idle"},
		{"WEFT_PROXY_ADMIN_MAX_CONNECTIONS", "500", "admin connections open at once (and at most 16 per client address); more are closed at once"},
		{vocab.EnvTapAddr, "0.0.0.0:4190", "tap server (io.linkerd.proxy.tap over mutual TLS); opened only when tap identities are set"},
		{vocab.EnvTapIdentities, "", "comma-separated identities accepted as tappers (e.g. the tap service's); empty turns tap off"},
		{vocab.EnvTapMaxTaps, "16", "taps open at once; more are refused with RESOURCE_EXHAUSTED"},
		{vocab.EnvTapMaxEventsPerSecond, "1000", "events one tap receives per second; requests beyond it are not reported and are counted in tap_events_dropped_total"},
		{"WEFT_PROXY_TAP_HANDSHAKE_TIMEOUT", "3s", "how long a tap client's TLS handshake may take; a client that is not an accepted tapper is closed right after it and never holds a connection slot"},
		{"WEFT_PROXY_OUTBOUND_SEND_BUFFER", "262144", "kernel send buffer of each connection from the local application to the outbound listeners, bytes (0: the kernel's default, which grows to net.ipv4.tcp_wmem's maximum for a client that does not read)"},
		{"WEFT_PROXY_INBOUND_PORTS_ONLY", "false", "true: the inbound forwards only to WEFT_PROXY_INBOUND_PORTS, whatever a peer's transport header names (the local mesh sets it, where loopback is shared); false: to any port but the proxy's own and the skip ports, as Linkerd"},
	}, extraSettings()...)
}

// prefixList formats prefixes as the comma-separated list the environment
// variables take.
func prefixList(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

// FromEnv reads the configuration from environment variables through
// lookup (os.LookupEnv in production). Every invalid value is reported,
// each naming its variable and value.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	cfg := DefaultConfig()
	var errs []error
	bad := func(name, val string, err error) {
		errs = append(errs, fmt.Errorf("dataplane: %s=%q: %w", name, val, err))
	}
	listen := func(name string, dst *string) {
		v, ok := lookup(name)
		if !ok {
			return
		}
		v = strings.TrimSpace(v)
		if v == "" || v == "off" {
			*dst = ""
			return
		}
		if err := envcheck.HostPort(v, true); err != nil {
			bad(name, v, err)
			return
		}
		*dst = v
	}
	ports := func(name string, dst *Ports) {
		if v, ok := lookup(name); ok {
			p, err := ParsePorts(v)
			if err != nil {
				bad(name, v, err)
				return
			}
			*dst = p
		}
	}
	duration := func(name string, dst *time.Duration, allowZero bool) {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			d, err := parseDuration(strings.TrimSpace(v))
			switch {
			case err != nil:
				bad(name, v, err)
			case d < 0 || (d == 0 && !allowZero):
				bad(name, v, errors.New("must be positive"))
			default:
				*dst = d
			}
		}
	}

	listen("WEFT_PROXY_INBOUND_ADDR", &cfg.InboundAddr)
	listen("WEFT_PROXY_OUTBOUND_ADDR", &cfg.OutboundAddr)
	listen("WEFT_PROXY_ADMIN_ADDR", &cfg.AdminAddr)
	listen("WEFT_PROXY_OUTBOUND_CONNECT_ADDR", &cfg.ConnectAddr)
	if v, ok := lookup("WEFT_PROXY_OUTBOUND_MAPPINGS"); ok {
		m, err := ParseMappings(v)
		if err != nil {
			bad("WEFT_PROXY_OUTBOUND_MAPPINGS", v, err)
		}
		cfg.Mappings = m
	}
	ports("WEFT_PROXY_INBOUND_PORTS", &cfg.InboundPorts)
	ports("WEFT_PROXY_INBOUND_OPAQUE_PORTS", &cfg.InboundOpaquePorts)
	ports("WEFT_PROXY_INBOUND_SKIP_PORTS", &cfg.InboundSkipPorts)
	ports("WEFT_PROXY_OUTBOUND_SKIP_PORTS", &cfg.OutboundSkipPorts)
	if v, ok := lookup("WEFT_PROXY_INBOUND_FORWARD_HOST"); ok && strings.TrimSpace(v) != "" {
		v = strings.TrimSpace(v)
		if _, err := netip.ParseAddr(v); err != nil {
			bad("WEFT_PROXY_INBOUND_FORWARD_HOST", v, errors.New("not an IP address"))
		} else {
			cfg.InboundForwardHost = v
		}
	}
	if v, ok := lookup("WEFT_PROXY_DEFAULT_INBOUND_POLICY"); ok && strings.TrimSpace(v) != "" {
		v = strings.TrimSpace(v)
		if _, err := defaultPolicy(v, nil); err != nil {
			bad("WEFT_PROXY_DEFAULT_INBOUND_POLICY", v, fmt.Errorf("want one of %s", strings.Join(DefaultPolicies(), ", ")))
		} else {
			cfg.DefaultInboundPolicy = v
		}
	}
	if v, ok := lookup("WEFT_PROXY_CLUSTER_NETWORKS"); ok && strings.TrimSpace(v) != "" {
		var nets []netip.Prefix
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				bad("WEFT_PROXY_CLUSTER_NETWORKS", v, fmt.Errorf("%q is not a CIDR", s))
				nets = nil
				break
			}
			nets = append(nets, p.Masked())
		}
		if nets != nil {
			cfg.ClusterNetworks = nets
		}
	}
	duration("WEFT_PROXY_DETECT_TIMEOUT", &cfg.DetectTimeout, false)
	duration("WEFT_PROXY_CONNECT_TIMEOUT", &cfg.ConnectTimeout, false)
	duration("WEFT_PROXY_RESOLVE_TIMEOUT", &cfg.ResolveTimeout, false)
	duration("WEFT_PROXY_POLICY_TIMEOUT", &cfg.PolicyTimeout, false)
	duration("WEFT_PROXY_SHUTDOWN_GRACE_PERIOD", &cfg.ShutdownGracePeriod, true)
	duration("WEFT_PROXY_HTTP_IDLE_TIMEOUT", &cfg.HTTPIdleTimeout, false)
	duration("WEFT_PROXY_HTTP_HEADER_TIMEOUT", &cfg.HTTPHeaderTimeout, false)
	duration("WEFT_PROXY_HTTP_POOL_WAIT_TIMEOUT", &cfg.HTTPPoolWaitTimeout, false)
	duration("WEFT_PROXY_HTTP2_WRITE_TIMEOUT", &cfg.H2WriteTimeout, false)
	duration("WEFT_PROXY_ADMIN_HEADER_TIMEOUT", &cfg.AdminHeaderTimeout, false)
	duration("WEFT_PROXY_ADMIN_IDLE_TIMEOUT", &cfg.AdminIdleTimeout, false)
	integer := func(name string, lo, hi int64, set func(int64)) {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < lo || n > hi {
				bad(name, v, fmt.Errorf("want a whole number in %d..%d", lo, hi))
				return
			}
			set(n)
		}
	}
	integer("WEFT_PROXY_HTTP_MAX_HEADER_BYTES", 4096, 1<<20, func(n int64) { cfg.HTTPMaxHeaderBytes = int(n) })
	integer("WEFT_PROXY_HTTP2_MAX_CONCURRENT_STREAMS", 1, 10000, func(n int64) { cfg.H2MaxConcurrentStreams = uint32(n) })
	integer("WEFT_PROXY_HTTP2_STREAM_WINDOW", 65535, 1<<30, func(n int64) { cfg.H2StreamWindow = int32(n) })
	integer("WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW", 65535, 1<<30, func(n int64) { cfg.H2InitialStreamWindow = int32(n) })
	integer("WEFT_PROXY_HTTP2_CONNECTION_WINDOW", 65535, 1<<30, func(n int64) { cfg.H2ConnectionWindow = int32(n) })
	integer("WEFT_PROXY_HTTP2_RESET_BUDGET", 1, 1<<20, func(n int64) { cfg.H2ResetBudget = int(n) })
	integer("WEFT_PROXY_HTTP2_BUFFER_LIMIT", 0, 1<<34, func(n int64) { cfg.H2BufferLimit = n })
	integer("WEFT_PROXY_OUTBOUND_SEND_BUFFER", 0, maxSendBuffer, func(n int64) {
		if n != 0 && n < minSendBuffer {
			bad("WEFT_PROXY_OUTBOUND_SEND_BUFFER", strconv.FormatInt(n, 10), fmt.Errorf("want 0 (the kernel's default) or at least %d bytes", minSendBuffer))
			return
		}
		cfg.OutboundSendBuffer = int(n)
	})
	integer("WEFT_PROXY_ADMIN_MAX_CONNECTIONS", 1, 100000, func(n int64) { cfg.AdminMaxConnections = int(n) })
	listen(vocab.EnvTapAddr, &cfg.TapAddr)
	if v, ok := lookup(vocab.EnvTapIdentities); ok {
		ids, err := ParseIdentities(v)
		if err != nil {
			bad(vocab.EnvTapIdentities, v, err)
		}
		cfg.TapIdentities = ids
	}
	integer(vocab.EnvTapMaxTaps, 1, 1024, func(n int64) { cfg.TapMaxTaps = int(n) })
	integer(vocab.EnvTapMaxEventsPerSecond, 1, 1<<20, func(n int64) { cfg.TapMaxEventsPerSecond = int(n) })
	duration("WEFT_PROXY_TAP_HANDSHAKE_TIMEOUT", &cfg.TapHandshakeTimeout, false)
	if v, ok := lookup("WEFT_PROXY_INBOUND_PORTS_ONLY"); ok && strings.TrimSpace(v) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			bad("WEFT_PROXY_INBOUND_PORTS_ONLY", v, errors.New("want true or false"))
		} else {
			cfg.InboundPortsOnly = b
		}
	}
	if v, ok := lookup("WEFT_PROXY_ADMIN_SHUTDOWN"); ok && strings.TrimSpace(v) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			bad("WEFT_PROXY_ADMIN_SHUTDOWN", v, errors.New("not a boolean"))
		} else {
			cfg.AdminShutdown = b
		}
	}
	readExtras(lookup, &cfg, bad)
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	// The binary binds its own listeners (Listen), so it needs addresses.
	return cfg, cfg.checkListenAddrs()
}

// LoadEnv is FromEnv(os.LookupEnv).
func LoadEnv() (Config, error) { return FromEnv(os.LookupEnv) }

// errNoListener is returned when a proxy would serve no traffic.
var errNoListener = errors.New("dataplane: no inbound or outbound listener configured")

// checkListenAddrs reports a Config that names no listener carrying
// traffic (inbound, outbound, connect or a mapping). Listen and FromEnv
// need one; New does not, since Run may be given listeners the caller
// opened itself.
func (c Config) checkListenAddrs() error {
	if c.InboundAddr == "" && c.OutboundAddr == "" && c.ConnectAddr == "" && len(c.Mappings) == 0 {
		return errNoListener
	}
	return nil
}

// Validate checks the relations between settings. The listener addresses
// are checked only when set (distinct, and so on): a caller who opens its
// own listeners and hands them to Run needs none; Listen requires at least
// one that carries traffic.
func (c Config) Validate() error {
	var errs []error
	seen := map[string]string{}
	addrs := map[string]string{"inbound": c.InboundAddr, "outbound": c.OutboundAddr, "admin": c.AdminAddr, "connect": c.ConnectAddr}
	if len(c.TapIdentities) > 0 {
		addrs["tap"] = c.TapAddr
	}
	for name, a := range addrs {
		if a == "" {
			continue
		}
		if other, dup := seen[a]; dup && !strings.HasSuffix(a, ":0") {
			errs = append(errs, fmt.Errorf("dataplane: %s and %s listeners share address %s", other, name, a))
		}
		seen[a] = name
	}
	for _, m := range c.Mappings {
		if other, dup := seen[m.Listen]; dup && !strings.HasSuffix(m.Listen, ":0") {
			errs = append(errs, fmt.Errorf("dataplane: mapping %s=%s reuses the %s listener's address", m.Listen, m.Authority, other))
		}
		seen[m.Listen] = "mapping"
	}
	if c.DetectTimeout <= 0 || c.ConnectTimeout <= 0 || c.ResolveTimeout <= 0 || c.PolicyTimeout <= 0 || c.ShutdownGracePeriod < 0 ||
		c.HTTPIdleTimeout <= 0 || c.HTTPHeaderTimeout <= 0 || c.AdminHeaderTimeout <= 0 || c.AdminIdleTimeout <= 0 || c.H2WriteTimeout < 0 {
		errs = append(errs, errors.New("dataplane: timeouts must be positive"))
	}
	if w := c.H2InitialStreamWindow; w != 0 && (w < 65535 || w > 1<<30) {
		errs = append(errs, fmt.Errorf("dataplane: the initial HTTP/2 stream window must be 0 (256 KiB) or 65535..%d bytes, got %d", 1<<30, w))
	}
	if c.H2BufferLimit < 0 {
		errs = append(errs, fmt.Errorf("dataplane: the HTTP/2 buffer limit must be 0 (twice the connection window) or positive, got %d", c.H2BufferLimit))
	}
	if c.HTTPMaxHeaderBytes < 4096 || c.H2MaxConcurrentStreams == 0 || c.H2StreamWindow < 65535 || c.H2ConnectionWindow < 65535 || c.H2ResetBudget <= 0 {
		errs = append(errs, errors.New("dataplane: HTTP limits must be set (header bytes at least 4096, streams at least 1, windows at least 65535, reset budget at least 1)"))
	}
	if b := c.OutboundSendBuffer; b != 0 && (b < minSendBuffer || b > maxSendBuffer) {
		errs = append(errs, fmt.Errorf("dataplane: the outbound send buffer must be 0 (the kernel's default) or %d..%d bytes, got %d", minSendBuffer, maxSendBuffer, b))
	}
	if c.AdminMaxConnections <= 0 {
		errs = append(errs, errors.New("dataplane: the admin connection cap must be at least 1"))
	}
	if _, err := defaultPolicy(c.DefaultInboundPolicy, c.ClusterNetworks); err != nil {
		errs = append(errs, fmt.Errorf("dataplane: default inbound policy: %w", err))
	}
	if c.TapMaxTaps <= 0 || c.TapMaxEventsPerSecond <= 0 || c.TapHandshakeTimeout < 0 {
		errs = append(errs, errors.New("dataplane: tap limits must be positive"))
	}
	if _, err := netip.ParseAddr(c.InboundForwardHost); err != nil {
		errs = append(errs, fmt.Errorf("dataplane: inbound forward host %q is not an IP address", c.InboundForwardHost))
	}
	errs = append(errs, c.Extras.validate()...)
	return errors.Join(errs...)
}

// Ports is a set of TCP ports given as ranges.
type Ports []iptables.PortRange

// ParsePorts parses "25,587,9000-9100".
func ParsePorts(s string) (Ports, error) {
	p, err := iptables.ParsePorts(s)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "iptables: "))
	}
	return Ports(p), nil
}

// Contains reports whether port is in the set.
func (p Ports) Contains(port uint16) bool {
	for _, r := range p {
		if port >= r.First && port <= r.Last {
			return true
		}
	}
	return false
}

// String renders the set as ParsePorts reads it.
func (p Ports) String() string {
	parts := make([]string, len(p))
	for i, r := range p {
		if r.First == r.Last {
			parts[i] = strconv.Itoa(int(r.First))
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r.First, r.Last)
		}
	}
	return strings.Join(parts, ",")
}

// List expands the set into single ports (ranges capped at 4096 ports).
func (p Ports) List() []uint16 {
	var out []uint16
	for _, r := range p {
		for port := int(r.First); port <= int(r.Last) && len(out) < 4096; port++ {
			out = append(out, uint16(port))
		}
	}
	return out
}

// ParseMappings parses "LISTEN=AUTHORITY,...".
func ParseMappings(s string) ([]Mapping, error) {
	var out []Mapping
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		listen, authority, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("mapping %q: want LISTEN=AUTHORITY", item)
		}
		listen, authority = strings.TrimSpace(listen), strings.TrimSpace(authority)
		if err := envcheck.HostPort(listen, true); err != nil {
			return nil, fmt.Errorf("mapping %q: listen address: %w", item, err)
		}
		if err := envcheck.HostPort(authority, false); err != nil {
			return nil, fmt.Errorf("mapping %q: authority: %w", item, err)
		}
		out = append(out, Mapping{Listen: listen, Authority: authority})
	}
	return out, nil
}

// ParseTrustAnchors parses a PEM bundle holding at least one certificate.
func ParseTrustAnchors(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if strings.TrimSpace(string(rest)) != "" {
				return nil, errors.New("trailing data that is not PEM")
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, want CERTIFICATE", n+1, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("no certificate")
	}
	return pool, nil
}

// parseDuration accepts Go durations and a bare number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a duration (like 10s or 2m)")
	}
	return d, nil
}
