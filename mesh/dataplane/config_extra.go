package dataplane

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Access log formats (Config.AccessLog), as Linkerd's proxy names them;
// internal/accesslog writes them.
const (
	AccessLogApache = "apache"
	AccessLogJSON   = "json"
)

// Extras are per-direction settings and optional behaviour that Linkerd's
// config.linkerd.io annotations turn on; the injector renders them only
// when an annotation or Values set them.
type Extras struct {
	// InboundConnectTimeout bounds dialling the application
	// (WEFT_PROXY_INBOUND_CONNECT_TIMEOUT); zero means ConnectTimeout,
	// which bounds dialling remote endpoints (and is also set by
	// WEFT_PROXY_OUTBOUND_CONNECT_TIMEOUT).
	InboundConnectTimeout time.Duration
	// InboundDetectTimeout and OutboundDetectTimeout bound protocol
	// detection per direction (WEFT_PROXY_INBOUND_DETECT_TIMEOUT,
	// WEFT_PROXY_OUTBOUND_DETECT_TIMEOUT); zero means DetectTimeout.
	InboundDetectTimeout  time.Duration
	OutboundDetectTimeout time.Duration
	// DestinationIdleTimeout is how long an outbound destination nobody
	// uses keeps its discovery watch
	// (WEFT_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT); zero means one minute.
	// WithDestinationIdleTimeout overrides it.
	DestinationIdleTimeout time.Duration
	// RequireIdentityPorts are inbound ports that refuse every client
	// without a mesh identity, whatever the policy allows
	// (WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS).
	RequireIdentityPorts Ports
	// AccessLog is "apache" or "json" to write one line per inbound HTTP
	// request in Linkerd's formats, to the writer given with WithAccessLog
	// (WEFT_PROXY_ACCESS_LOG); empty means off.
	AccessLog string
	// CPURatioLimit, in (0, 1], caps the worker threads at this fraction
	// of the machine's CPUs (WEFT_PROXY_CPU_RATIO_LIMIT); see WorkerLimit.
	CPURatioLimit float64
	// HTTP1OverH2 carries HTTP/1.1 requests to meshed endpoints over the
	// HTTP/2 hop between proxies (l5d-orig-proto), as Linkerd does,
	// instead of HTTP/1.1 over mutual TLS on a keep-alive pool
	// (WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2). HTTP/2 and gRPC requests take
	// the HTTP/2 hop either way. See docs/dataplane.md, "The hop between
	// proxies".
	HTTP1OverH2 bool
}

// extraSettings documents the variables of Extras.
func extraSettings() []Setting {
	return []Setting{
		{"WEFT_PROXY_INBOUND_CONNECT_TIMEOUT", "", "timeout for dialling the application (default: WEFT_PROXY_CONNECT_TIMEOUT)"},
		{"WEFT_PROXY_OUTBOUND_CONNECT_TIMEOUT", "", "timeout for dialling remote endpoints (overrides WEFT_PROXY_CONNECT_TIMEOUT for them)"},
		{"WEFT_PROXY_INBOUND_DETECT_TIMEOUT", "", "protocol detection timeout for inbound connections (default: WEFT_PROXY_DETECT_TIMEOUT)"},
		{"WEFT_PROXY_OUTBOUND_DETECT_TIMEOUT", "", "protocol detection timeout for outbound connections (default: WEFT_PROXY_DETECT_TIMEOUT)"},
		{"WEFT_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT", "1m", "how long an unused outbound destination keeps its discovery watch"},
		{"WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS", "", "inbound ports (and ranges) that refuse clients without a mesh identity"},
		{"WEFT_PROXY_ACCESS_LOG", "", "apache or json: one line per inbound HTTP request on stderr, in Linkerd's formats"},
		{"WEFT_PROXY_CPU_RATIO_LIMIT", "", "fraction (0, 1] of the node's CPUs the proxy's worker threads may use"},
		{"WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2", "false", "true: HTTP/1.1 requests to meshed endpoints cross the proxy-to-proxy hop as HTTP/2, not as HTTP/1.1 over mutual TLS"},
	}
}

// readExtras reads the variables of Extras; bad records each invalid one.
func readExtras(lookup func(string) (string, bool), cfg *Config, bad func(name, val string, err error)) {
	duration := func(name string, dst *time.Duration) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return
		}
		d, err := parseDuration(strings.TrimSpace(v))
		switch {
		case err != nil:
			bad(name, v, err)
		case d <= 0:
			bad(name, v, errors.New("must be positive"))
		default:
			*dst = d
		}
	}
	duration("WEFT_PROXY_INBOUND_CONNECT_TIMEOUT", &cfg.InboundConnectTimeout)
	duration("WEFT_PROXY_OUTBOUND_CONNECT_TIMEOUT", &cfg.ConnectTimeout)
	duration("WEFT_PROXY_INBOUND_DETECT_TIMEOUT", &cfg.InboundDetectTimeout)
	duration("WEFT_PROXY_OUTBOUND_DETECT_TIMEOUT", &cfg.OutboundDetectTimeout)
	duration("WEFT_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT", &cfg.DestinationIdleTimeout)
	if v, ok := lookup("WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS"); ok {
		p, err := ParsePorts(v)
		if err != nil {
			bad("WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS", v, err)
		} else {
			cfg.RequireIdentityPorts = p
		}
	}
	if v, ok := lookup("WEFT_PROXY_ACCESS_LOG"); ok && strings.TrimSpace(v) != "" {
		switch f := strings.ToLower(strings.TrimSpace(v)); f {
		case AccessLogApache, AccessLogJSON:
			cfg.AccessLog = f
		default:
			bad("WEFT_PROXY_ACCESS_LOG", v, errors.New("want apache or json"))
		}
	}
	if v, ok := lookup("WEFT_PROXY_CPU_RATIO_LIMIT"); ok && strings.TrimSpace(v) != "" {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || r <= 0 || r > 1 {
			bad("WEFT_PROXY_CPU_RATIO_LIMIT", v, errors.New("want a ratio in (0, 1]"))
		} else {
			cfg.CPURatioLimit = r
		}
	}
	if v, ok := lookup("WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2"); ok && strings.TrimSpace(v) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			bad("WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2", v, errors.New("want true or false"))
		} else {
			cfg.HTTP1OverH2 = b
		}
	}
}

func (e Extras) validate() []error {
	var errs []error
	if e.InboundConnectTimeout < 0 || e.InboundDetectTimeout < 0 || e.OutboundDetectTimeout < 0 || e.DestinationIdleTimeout < 0 {
		errs = append(errs, errors.New("dataplane: timeouts must not be negative"))
	}
	switch e.AccessLog {
	case "", AccessLogApache, AccessLogJSON:
	default:
		errs = append(errs, fmt.Errorf("dataplane: access log format %q is not apache or json", e.AccessLog))
	}
	if e.CPURatioLimit < 0 || e.CPURatioLimit > 1 {
		errs = append(errs, fmt.Errorf("dataplane: CPU ratio limit %v is not in (0, 1]", e.CPURatioLimit))
	}
	return errs
}

// WorkerLimit returns how many worker threads (GOMAXPROCS) the proxy may
// use with ratio of numCPU CPUs, given the current limit (which Go already
// derives from the container's CPU limit): at least one, never more than
// current. A zero ratio leaves current unchanged.
func WorkerLimit(numCPU, current int, ratio float64) int {
	if ratio <= 0 || ratio > 1 {
		return current
	}
	n := int(float64(numCPU) * ratio)
	n = max(n, 1)
	return min(n, current)
}
