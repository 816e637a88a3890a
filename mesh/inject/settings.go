package inject

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/weftmesh/weft/apis/vocab"
)

// setting describes one configurable value: its annotation keys (most
// preferred first), how an annotation value is applied, and how the
// resolved value prints.
type setting struct {
	name  string
	keys  []string
	apply func(w *workingConfig, value string) error
	show  func(w *workingConfig) string
}

func settingsTable() []setting {
	return append(baseSettings(), extraSettings()...)
}

// settingsIndex returns the settings table and, for each annotation key,
// the index of the setting it belongs to. Both are built once and only
// read afterwards: the table holds no state (its functions work on the
// workingConfig they are given), and building it for every pod was a
// fifth of a review's allocations.
var settingsIndex = sync.OnceValues(func() ([]setting, map[string]int) {
	table := settingsTable()
	known := make(map[string]int)
	for i, s := range table {
		for _, k := range s.keys {
			known[k] = i
		}
	}
	return table, known
})

func baseSettings() []setting {
	port := func(get func(w *workingConfig) *int32) func(*workingConfig, string) error {
		return func(w *workingConfig, v string) error {
			p, err := parsePort(strings.TrimSpace(v))
			if err != nil {
				return err
			}
			*get(w) = int32(p)
			return nil
		}
	}
	quantity := func(get func(w *workingConfig) *string) func(*workingConfig, string) error {
		return func(w *workingConfig, v string) error {
			if _, err := parseQuantity(v); err != nil {
				return err
			}
			*get(w) = strings.TrimSpace(v)
			return nil
		}
	}
	ports := func(get func(w *workingConfig) *PortRanges) func(*workingConfig, string) error {
		return func(w *workingConfig, v string) error {
			r, err := ParsePorts(v, w.named)
			if err != nil {
				return err
			}
			*get(w) = r
			return nil
		}
	}
	itoa := func(n int32) string { return strconv.Itoa(int(n)) }
	return []setting{
		{name: "proxy-image", keys: []string{vocab.AnnotationProxyImage},
			apply: func(w *workingConfig, v string) error {
				if !isImageName(v) {
					return fmt.Errorf("%q is not an image name (without tag; the tag is proxy-version)", v)
				}
				w.proxyImageName = v
				return nil
			},
			show: func(w *workingConfig) string { return w.proxyImageName }},
		{name: "proxy-version", keys: []string{vocab.AnnotationProxyVersionOverride},
			apply: func(w *workingConfig, v string) error {
				if !isImageTag(v) {
					return fmt.Errorf("%q is not an image tag", v)
				}
				w.proxyVersion = v
				return nil
			},
			show: func(w *workingConfig) string { return w.proxyVersion }},
		{name: "init-image", keys: []string{vocab.AnnotationInitImage},
			apply: func(w *workingConfig, v string) error {
				if !isImageName(v) {
					return fmt.Errorf("%q is not an image name (without tag; the tag is init-image-version)", v)
				}
				w.initImageName = v
				return nil
			},
			show: func(w *workingConfig) string { return w.initImageName }},
		{name: "init-image-version", keys: []string{vocab.AnnotationInitImageVersion},
			apply: func(w *workingConfig, v string) error {
				if !isImageTag(v) {
					return fmt.Errorf("%q is not an image tag", v)
				}
				w.initVersion = v
				return nil
			},
			show: func(w *workingConfig) string { return w.initVersion }},
		{name: "image-pull-policy", keys: []string{vocab.AnnotationImagePullPolicy},
			apply: func(w *workingConfig, v string) error {
				p, err := parsePullPolicy(v)
				if err != nil {
					return err
				}
				w.ProxyPull, w.InitPull = p, p
				return nil
			},
			show: func(w *workingConfig) string { return string(w.ProxyPull) }},
		{name: "inbound-port", keys: []string{vocab.AnnotationInboundPort},
			apply: port(func(w *workingConfig) *int32 { return &w.Ports.Inbound }),
			show:  func(w *workingConfig) string { return itoa(w.Ports.Inbound) }},
		{name: "outbound-port", keys: []string{vocab.AnnotationOutboundPort},
			apply: port(func(w *workingConfig) *int32 { return &w.Ports.Outbound }),
			show:  func(w *workingConfig) string { return itoa(w.Ports.Outbound) }},
		{name: "admin-port", keys: []string{vocab.AnnotationAdminPort},
			apply: port(func(w *workingConfig) *int32 { return &w.Ports.Admin }),
			show:  func(w *workingConfig) string { return itoa(w.Ports.Admin) }},
		{name: "control-port", keys: []string{vocab.AnnotationControlPort},
			apply: port(func(w *workingConfig) *int32 { return &w.Ports.Control }),
			show:  func(w *workingConfig) string { return itoa(w.Ports.Control) }},
		{name: "proxy-cpu-request", keys: []string{vocab.AnnotationProxyCPURequest},
			apply: quantity(func(w *workingConfig) *string { return &w.proxyRes.CPU.Request }),
			show:  func(w *workingConfig) string { return w.proxyRes.CPU.Request }},
		{name: "proxy-cpu-limit", keys: []string{vocab.AnnotationProxyCPULimit},
			apply: quantity(func(w *workingConfig) *string { return &w.proxyRes.CPU.Limit }),
			show:  func(w *workingConfig) string { return w.proxyRes.CPU.Limit }},
		{name: "proxy-memory-request", keys: []string{vocab.AnnotationProxyMemoryRequest},
			apply: quantity(func(w *workingConfig) *string { return &w.proxyRes.Memory.Request }),
			show:  func(w *workingConfig) string { return w.proxyRes.Memory.Request }},
		{name: "proxy-memory-limit", keys: []string{vocab.AnnotationProxyMemoryLimit},
			apply: quantity(func(w *workingConfig) *string { return &w.proxyRes.Memory.Limit }),
			show:  func(w *workingConfig) string { return w.proxyRes.Memory.Limit }},
		{name: "proxy-ephemeral-storage-request", keys: []string{vocab.AnnotationProxyEphemeralRequest},
			apply: quantity(func(w *workingConfig) *string { return &w.proxyRes.EphemeralStorage.Request }),
			show:  func(w *workingConfig) string { return w.proxyRes.EphemeralStorage.Request }},
		{name: "proxy-ephemeral-storage-limit", keys: []string{vocab.AnnotationProxyEphemeralLimit},
			apply: quantity(func(w *workingConfig) *string { return &w.proxyRes.EphemeralStorage.Limit }),
			show:  func(w *workingConfig) string { return w.proxyRes.EphemeralStorage.Limit }},
		{name: "proxy-uid", keys: []string{vocab.AnnotationProxyUID},
			apply: func(w *workingConfig, v string) error {
				n, err := parseID(v)
				if err != nil {
					return err
				}
				if n == 0 {
					return errors.New(`"0": the proxy must run as a non-root user`)
				}
				w.UID = n
				return nil
			},
			show: func(w *workingConfig) string { return strconv.FormatInt(w.UID, 10) }},
		{name: "proxy-gid", keys: []string{vocab.AnnotationProxyGID},
			apply: func(w *workingConfig, v string) error {
				n, err := parseID(v)
				if err != nil {
					return err
				}
				w.GID = n
				return nil
			},
			show: func(w *workingConfig) string {
				if w.GID == 0 {
					return ""
				}
				return strconv.FormatInt(w.GID, 10)
			}},
		{name: "proxy-log-level", keys: []string{vocab.AnnotationProxyLogLevel},
			apply: func(w *workingConfig, v string) error {
				if err := checkLogLevel(v); err != nil {
					return err
				}
				w.LogLevel = v
				return nil
			},
			show: func(w *workingConfig) string { return w.LogLevel }},
		{name: "proxy-log-format", keys: []string{vocab.AnnotationProxyLogFormat},
			apply: func(w *workingConfig, v string) error {
				f, err := parseLogFormat(v)
				w.LogFormat = f
				return err
			},
			show: func(w *workingConfig) string { return w.LogFormat }},
		{name: "skip-inbound-ports", keys: []string{vocab.AnnotationSkipInboundPorts},
			apply: ports(func(w *workingConfig) *PortRanges { return &w.SkipInboundPorts }),
			show:  func(w *workingConfig) string { return w.SkipInboundPorts.String() }},
		{name: "skip-outbound-ports", keys: []string{vocab.AnnotationSkipOutboundPorts},
			apply: ports(func(w *workingConfig) *PortRanges { return &w.SkipOutboundPorts }),
			show:  func(w *workingConfig) string { return w.SkipOutboundPorts.String() }},
		{name: "skip-subnets", keys: []string{vocab.AnnotationSkipSubnets},
			apply: func(w *workingConfig, v string) error {
				s, err := parseSubnets(v)
				w.SkipSubnets = s
				return err
			},
			show: func(w *workingConfig) string { return subnetsString(w.SkipSubnets) }},
		{name: "opaque-ports", keys: []string{vocab.AnnotationOpaquePorts},
			apply: func(w *workingConfig, v string) error {
				r, err := ParsePorts(v, w.named)
				if err != nil {
					return err
				}
				w.OpaquePorts, w.opaqueText = r, v
				return nil
			},
			show: func(w *workingConfig) string { return w.OpaquePorts.String() }},
		{name: "proxy-await", keys: []string{vocab.AnnotationProxyAwait},
			apply: func(w *workingConfig, v string) error {
				b, err := parseEnabled(v)
				w.Await = b
				return err
			},
			show: func(w *workingConfig) string { return enabledString(w.Await) }},
		{name: "proxy-enable-native-sidecar", keys: []string{vocab.AnnotationNativeSidecar, vocab.AnnotationNativeSidecarBeta, vocab.AnnotationNativeSidecarAlpha},
			apply: func(w *workingConfig, v string) error {
				b, err := parseBool(v)
				w.NativeSidecar = b
				return err
			},
			show: func(w *workingConfig) string { return strconv.FormatBool(w.NativeSidecar) }},
		{name: "default-inbound-policy", keys: []string{vocab.AnnotationDefaultInboundPolicy},
			apply: func(w *workingConfig, v string) error {
				p, err := parseInboundPolicy(v)
				w.DefaultInboundPolicy = p
				return err
			},
			show: func(w *workingConfig) string { return w.DefaultInboundPolicy }},
		{name: "shutdown-grace-period", keys: []string{vocab.AnnotationShutdownGracePeriod},
			apply: func(w *workingConfig, v string) error {
				d, err := parseDuration(v)
				w.ShutdownGracePeriod = d
				return err
			},
			show: func(w *workingConfig) string { return w.ShutdownGracePeriod.String() }},
		{name: "proxy-admin-shutdown", keys: []string{vocab.AnnotationProxyAdminShutdown},
			apply: func(w *workingConfig, v string) error {
				b, err := parseEnabled(v)
				w.AdminShutdown = b
				return err
			},
			show: func(w *workingConfig) string { return enabledString(w.AdminShutdown) }},
		{name: "tap-identities", keys: []string{vocab.AnnotationTapIdentities},
			apply: func(w *workingConfig, v string) error {
				ids, err := parseTapIdentities(v)
				w.TapIdentities = ids
				return err
			},
			show: func(w *workingConfig) string { return strings.Join(w.TapIdentities, ",") }},
		// After tap-identities: disabling wins over any list.
		{name: "disable-tap", keys: []string{vocab.AnnotationDisableTap},
			apply: func(w *workingConfig, v string) error {
				b, err := parseBool(v)
				if b {
					w.TapIdentities = nil
				}
				return err
			},
			show: func(w *workingConfig) string { return strconv.FormatBool(len(w.TapIdentities) == 0) }},
		{name: "proxy-wait-before-exit-seconds", keys: []string{vocab.AnnotationWaitBeforeExitSeconds},
			apply: func(w *workingConfig, v string) error {
				n, err := parseSeconds(v)
				w.WaitBeforeExit = n
				return err
			},
			show: func(w *workingConfig) string { return strconv.FormatInt(w.WaitBeforeExit, 10) }},
	}
}

func enabledString(b bool) string {
	if b {
		return "enabled"
	}
	return "disabled"
}

// notApplicable gives, for a Linkerd proxy setting that has no meaning for
// Weft's proxy, the reason; using one of these keys yields a warning that
// says so (never "unknown annotation").
func notApplicable(key string) (string, bool) {
	switch key {
	case vocab.AnnotationEnableExternalProfiles:
		return "Weft's proxy already looks up ServiceProfiles for every destination, inside the cluster or not", true
	case vocab.AnnotationEnableGateway:
		return "Weft has no multicluster gateway mode", true
	case vocab.AnnotationProxyLogHTTPHeaders:
		return "Weft's proxy never writes HTTP header values to its logs", true
	case vocab.AnnotationMetricsHostnameLabels:
		return "Weft's outbound metrics always label requests with their destination authority (a bounded set of values), so there is nothing to turn on", true
	case vocab.AnnotationInboundDiscoveryUnusedTimeout:
		return "Weft's inbound proxy keeps one policy watch per application port for the life of the pod and has no inbound discovery cache to expire", true
	case vocab.AnnotationDisableIdentity:
		return "identity cannot be turned off in Weft (Linkerd no longer supports it either)", true
	}
	return "", false
}
