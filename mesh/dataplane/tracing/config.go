package tracing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/internal/envcheck"
)

// Config says where spans go and how the proxy names itself in them.
// FromEnv fills it from the WEFT_PROXY_TRACE_* variables the injector
// renders from Linkerd's trace-collector annotations.
type Config struct {
	// CollectorAddr is the collector's OTLP/gRPC address, HOST:PORT
	// (WEFT_PROXY_TRACE_COLLECTOR_ADDR); empty turns tracing off.
	CollectorAddr string
	// CollectorIdentity is the collector's mesh identity
	// (WEFT_PROXY_TRACE_COLLECTOR_IDENTITY, from Linkerd's
	// trace-collector-service-account). When set, spans go over mesh TLS
	// and the collector's side (its proxy) must present this identity;
	// when empty, in plaintext.
	CollectorIdentity string
	// ServiceName is the resource's service.name
	// (WEFT_PROXY_TRACE_SERVICE_NAME, default weft-proxy).
	ServiceName string
	// Attributes are added to the resource
	// (WEFT_PROXY_TRACE_ATTRIBUTES: KEY=VALUE lines, as Linkerd's
	// LINKERD2_PROXY_TRACE_EXTRA_ATTRIBUTES).
	Attributes map[string]string
	// Pod and Namespace name the workload (k8s.pod.name,
	// k8s.namespace.name); the proxy binary takes them from
	// WEFT_PROXY_POD and WEFT_PROXY_NAMESPACE.
	Pod       string
	Namespace string
	// MaxQueueSize bounds the spans waiting for export (0: 2048).
	MaxQueueSize int
}

// Enabled reports whether the settings turn tracing on.
func (c Config) Enabled() bool { return c.CollectorAddr != "" }

// DefaultServiceName is the service.name of the proxy's spans unless the
// settings name another.
const DefaultServiceName = "weft-proxy"

// DefaultMaxQueueSize is how many ended spans may wait for export; more
// are dropped.
const DefaultMaxQueueSize = 2048

// Limits on WEFT_PROXY_TRACE_ATTRIBUTES: the resource goes out with every
// batch, so it stays small.
const (
	maxAttributes     = 64
	maxAttributeKey   = 256
	maxAttributeValue = 1024
)

// Settings documents the variables FromEnv reads.
func Settings() []dataplane.Setting {
	return []dataplane.Setting{
		{Env: vocab.EnvTraceCollectorAddr, Help: "OTLP/gRPC collector that receives the proxy's spans (HOST:PORT); empty turns tracing off"},
		{Env: vocab.EnvTraceCollectorIdentity, Help: "the collector's mesh identity (from config.alpha.linkerd.io/trace-collector-service-account): spans go over mesh TLS and the collector's side must present it; empty: plaintext"},
		{Env: vocab.EnvTraceServiceName, Default: DefaultServiceName, Help: "service.name of the proxy's spans"},
		{Env: vocab.EnvTraceAttributes, Help: "extra resource attributes of the proxy's spans: KEY=VALUE lines"},
		{Env: vocab.EnvTraceProtocol, Default: "opentelemetry", Help: "export protocol; only opentelemetry (OTLP/gRPC) is supported"},
	}
}

// FromEnv reads the settings through lookup (os.LookupEnv in production).
// Every invalid value is reported, each naming its variable.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	cfg := Config{ServiceName: DefaultServiceName}
	var errs []error
	bad := func(name, val string, err error) {
		errs = append(errs, fmt.Errorf("tracing: %s=%q: %w", name, val, err))
	}
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	if v, ok := get(vocab.EnvTraceCollectorAddr); ok {
		if err := envcheck.HostPort(v, false); err != nil {
			bad(vocab.EnvTraceCollectorAddr, v, err)
		} else {
			cfg.CollectorAddr = v
		}
	}
	if v, ok := get(vocab.EnvTraceCollectorIdentity); ok {
		if err := envcheck.DNSName(v); err != nil {
			bad(vocab.EnvTraceCollectorIdentity, v, err)
		} else {
			cfg.CollectorIdentity = strings.ToLower(v)
		}
	}
	if v, ok := get(vocab.EnvTraceServiceName); ok {
		if err := checkText(v, maxAttributeValue); err != nil {
			bad(vocab.EnvTraceServiceName, v, err)
		} else {
			cfg.ServiceName = v
		}
	}
	if v, ok := get(vocab.EnvTraceAttributes); ok {
		attrs, err := ParseAttributes(v)
		if err != nil {
			bad(vocab.EnvTraceAttributes, abbreviate(v), err)
		} else {
			cfg.Attributes = attrs
		}
	}
	if v, ok := get(vocab.EnvTraceProtocol); ok && !strings.EqualFold(v, "opentelemetry") {
		bad(vocab.EnvTraceProtocol, v, errors.New("only opentelemetry (OTLP over gRPC) is supported"))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// ParseAttributes reads KEY=VALUE lines (blank lines skipped), as
// Linkerd's injector renders them. A key appears once; keys and values
// are printable text within the limits.
func ParseAttributes(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: want KEY=VALUE", i+1)
		case k == "":
			return nil, fmt.Errorf("line %d: empty key", i+1)
		}
		if err := checkText(k, maxAttributeKey); err != nil {
			return nil, fmt.Errorf("line %d: key: %w", i+1, err)
		}
		if err := checkText(v, maxAttributeValue); err != nil {
			return nil, fmt.Errorf("line %d: value of %s: %w", i+1, k, err)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: key %s given twice", i+1, k)
		}
		if len(out) == maxAttributes {
			return nil, fmt.Errorf("more than %d attributes", maxAttributes)
		}
		out[k] = v
	}
	return out, nil
}

// checkText accepts printable text (no control characters) of at most
// max bytes.
func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return fmt.Errorf("character %q is not printable text", r)
		}
	}
	return nil
}

func abbreviate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
