package control

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/internal/envcheck"
)

// Config names the control plane a proxy connects to and the workload it
// connects as: what Connect needs beyond the proxy's own settings
// (dataplane.Config). FromEnv fills it from the WEFT_PROXY_* variables the
// injector sets.
type Config struct {
	IdentityAddr       string // WEFT_PROXY_IDENTITY_ADDR: identity service, HOST:PORT
	DestinationAddr    string // WEFT_PROXY_DESTINATION_ADDR: destination service, HOST:PORT
	PolicyAddr         string // WEFT_PROXY_POLICY_ADDR: policy service, HOST:PORT
	TrustAnchorsPEM    []byte // WEFT_PROXY_TRUST_ANCHORS: PEM content, at least one certificate
	IdentityTokenFile  string // WEFT_PROXY_IDENTITY_TOKEN_FILE: token presented to the identity service
	IdentityName       string // WEFT_PROXY_IDENTITY_NAME: the workload's identity
	DestinationContext string // WEFT_PROXY_DESTINATION_CONTEXT: context token sent with destination lookups

	Namespace      string // WEFT_PROXY_NAMESPACE
	Pod            string // WEFT_PROXY_POD
	ServiceAccount string // WEFT_PROXY_SERVICE_ACCOUNT
}

// Settings lists every environment variable FromEnv reads, in the order the
// documentation and --help show them.
func Settings() []dataplane.Setting {
	return []dataplane.Setting{
		{Env: "WEFT_PROXY_IDENTITY_ADDR", Help: "identity service address (host:port)"},
		{Env: "WEFT_PROXY_DESTINATION_ADDR", Help: "destination service address (host:port)"},
		{Env: "WEFT_PROXY_POLICY_ADDR", Help: "policy service address (host:port)"},
		{Env: "WEFT_PROXY_TRUST_ANCHORS", Help: "PEM bundle of trust anchors (content, not a path)"},
		{Env: "WEFT_PROXY_IDENTITY_TOKEN_FILE", Help: "service-account token file presented to the identity service"},
		{Env: "WEFT_PROXY_IDENTITY_NAME", Help: "this workload's identity name"},
		{Env: "WEFT_PROXY_DESTINATION_CONTEXT", Help: "context token sent with destination lookups"},
		{Env: "WEFT_PROXY_NAMESPACE", Help: "workload namespace"},
		{Env: "WEFT_PROXY_POD", Help: "workload pod name"},
		{Env: "WEFT_PROXY_SERVICE_ACCOUNT", Help: "workload service account"},
	}
}

// FromEnv reads the configuration from environment variables through
// lookup (os.LookupEnv in production). Unset variables stay empty (Connect
// reports the ones it needs); every invalid value is reported, each naming
// its variable and value.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var cfg Config
	var errs []error
	bad := func(name, val string, err error) {
		errs = append(errs, fmt.Errorf("control: %s=%q: %w", name, val, err))
	}
	str := func(name string, dst *string) {
		if v, ok := lookup(name); ok {
			*dst = strings.TrimSpace(v)
		}
	}
	checked := func(name string, dst *string, check func(string) error) {
		v, ok := lookup(name)
		if v = strings.TrimSpace(v); !ok || v == "" {
			return
		}
		if err := check(v); err != nil {
			bad(name, v, err)
			return
		}
		*dst = v
	}
	dialAddr := func(s string) error { return envcheck.HostPort(s, false) }
	checked("WEFT_PROXY_IDENTITY_ADDR", &cfg.IdentityAddr, dialAddr)
	checked("WEFT_PROXY_DESTINATION_ADDR", &cfg.DestinationAddr, dialAddr)
	checked("WEFT_PROXY_POLICY_ADDR", &cfg.PolicyAddr, dialAddr)
	if v, ok := lookup("WEFT_PROXY_TRUST_ANCHORS"); ok && strings.TrimSpace(v) != "" {
		if _, err := dataplane.ParseTrustAnchors([]byte(v)); err != nil {
			bad("WEFT_PROXY_TRUST_ANCHORS", abbreviate(v), err)
		} else {
			cfg.TrustAnchorsPEM = []byte(v)
		}
	}
	str("WEFT_PROXY_IDENTITY_TOKEN_FILE", &cfg.IdentityTokenFile)
	checked("WEFT_PROXY_IDENTITY_NAME", &cfg.IdentityName, envcheck.DNSName)
	str("WEFT_PROXY_DESTINATION_CONTEXT", &cfg.DestinationContext)
	str("WEFT_PROXY_NAMESPACE", &cfg.Namespace)
	str("WEFT_PROXY_POD", &cfg.Pod)
	str("WEFT_PROXY_SERVICE_ACCOUNT", &cfg.ServiceAccount)
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// LoadEnv is FromEnv(os.LookupEnv).
func LoadEnv() (Config, error) { return FromEnv(os.LookupEnv) }

// abbreviate shortens a long value (a PEM bundle) for an error message.
func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
