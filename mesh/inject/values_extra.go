package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// validateExtras checks the Values fields that configure the proxy's
// optional behaviour, the debug sidecar and the network validator.
func (v *Values) validateExtras() []error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("inject: values: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if v.Proxy.AccessLog != "" {
		if _, err := parseAccessLog(v.Proxy.AccessLog); err != nil {
			bad("proxy.accessLog", "%v", err)
		}
	}
	for field, d := range map[string]time.Duration{
		"proxy.inboundConnectTimeout":               v.Proxy.InboundConnectTimeout.Duration,
		"proxy.outboundConnectTimeout":              v.Proxy.OutboundConnectTimeout.Duration,
		"proxy.outboundDiscoveryCacheUnusedTimeout": v.Proxy.OutboundDiscoveryCacheUnusedTimeout.Duration,
		"proxyInit.closeWaitTimeout":                v.ProxyInit.CloseWaitTimeout.Duration,
	} {
		if d < 0 {
			bad(field, "%s is negative", d)
		}
	}
	if d := v.ProxyInit.CloseWaitTimeout.Duration; d > 0 && d < time.Second {
		bad("proxyInit.closeWaitTimeout", "%s is under a second (the sysctl counts whole seconds)", d)
	}
	for field, s := range map[string]string{"proxy.requireIdentityOnInboundPorts": v.Proxy.RequireIdentityOnInboundPorts, "proxy.podInboundPorts": v.Proxy.PodInboundPorts} {
		if _, err := ParsePorts(s, nil); err != nil {
			bad(field, "%v", err)
		}
	}
	if r := v.Proxy.CPURatioLimit; r != 0 {
		if _, err := parseCPURatio(strconv.FormatFloat(r, 'g', -1, 64)); err != nil {
			bad("proxy.cpuRatioLimit", "%v", err)
		}
	}
	if err := checkEnv(v.Proxy.AdditionalEnv); err != nil {
		bad("proxy.additionalEnv", "%v", err)
	}
	if err := checkHostPort(v.NetworkValidator.ConnectAddr); err != nil {
		bad("networkValidator.connectAddr", "%v", err)
	}
	if v.NetworkValidator.ListenAddr != "" {
		if err := checkHostPort(v.NetworkValidator.ListenAddr); err != nil {
			bad("networkValidator.listenAddr", "%v", err)
		}
	}
	if v.NetworkValidator.Timeout.Duration <= 0 {
		bad("networkValidator.timeout", "%s is not positive", v.NetworkValidator.Timeout.Duration)
	}
	return errs
}

// checkHostPort accepts IP:port ("1.1.1.1:20001", "[fd00::1]:20001").
func checkHostPort(s string) error {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return fmt.Errorf("%q is not an IP address and port (1.1.1.1:20001, [fd00::1]:20001)", s)
	}
	return nil
}

// parseAccessLog accepts Linkerd's access-log formats, in any case.
func parseAccessLog(s string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(s)); f {
	case "apache", "json":
		return f, nil
	}
	return "", fmt.Errorf("%q is not an access log format (apache, json)", s)
}

// parseCPURatio accepts a fraction of the node's CPUs in (0, 1].
func parseCPURatio(s string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || r <= 0 || r > 1 {
		return 0, fmt.Errorf("%q is not a ratio in (0, 1]", s)
	}
	return r, nil
}

// parsePositiveDuration is a Go duration above zero.
func parsePositiveDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, err
	}
	if d == 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// maxAdditionalEnv bounds the entries of proxy-additional-env.
const maxAdditionalEnv = 64

// envNameRE is what Kubernetes accepts as an environment variable name.
var envNameRE = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// parseEnv reads the JSON list of Kubernetes EnvVar objects that
// config.linkerd.io/proxy-additional-env carries. Unknown fields are errors.
func parseEnv(s string) ([]corev1.EnvVar, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var env []corev1.EnvVar
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("not a JSON list of environment variables ([{\"name\":\"X\",\"value\":\"y\"}]): %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON list")
	}
	return env, checkEnv(env)
}

func checkEnv(env []corev1.EnvVar) error {
	if len(env) > maxAdditionalEnv {
		return fmt.Errorf("%d variables (at most %d)", len(env), maxAdditionalEnv)
	}
	seen := map[string]bool{}
	for i, e := range env {
		if !envNameRE.MatchString(e.Name) {
			return fmt.Errorf("entry %d: %q is not an environment variable name", i+1, e.Name)
		}
		if seen[e.Name] {
			return fmt.Errorf("entry %d: %s is listed twice", i+1, e.Name)
		}
		seen[e.Name] = true
		if e.Value != "" && e.ValueFrom != nil {
			return fmt.Errorf("entry %d (%s): value and valueFrom are exclusive", i+1, e.Name)
		}
	}
	return nil
}

// mergeEnv merges layers of variables by name: a later layer replaces an
// earlier entry of the same name in place, new names are appended.
func mergeEnv(layers ...[]corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	index := map[string]int{}
	for _, layer := range layers {
		for _, e := range layer {
			if i, ok := index[e.Name]; ok {
				out[i] = e
				continue
			}
			index[e.Name] = len(out)
			out = append(out, e)
		}
	}
	return out
}

func envNames(env []corev1.EnvVar) string {
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	return strings.Join(names, ",")
}
