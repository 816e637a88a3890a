package proxycmd

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

// ProxyEnv is everything `weft-proxy run` reads from its WEFT_PROXY_*
// variables, each part read by the package that uses it: the proxy's own
// settings (dataplane.FromEnv), the control plane and workload
// (control.FromEnv), and the logger's level and format (here, since only
// the binary builds a logger from settings).
type ProxyEnv struct {
	Proxy   dataplane.Config
	Control control.Config
	// Trace is where the proxy's spans go (tracing.FromEnv); tracing is
	// off unless it names a collector.
	Trace tracing.Config
	// LogLevel is WEFT_PROXY_LOG_LEVEL, info by default ("warn,linkerd=info"
	// style accepted); LogFormat is WEFT_PROXY_LOG_FORMAT, plain or json.
	LogLevel  string
	LogFormat string
}

// logSettings documents the variables of the logger.
func logSettings() []dataplane.Setting {
	return []dataplane.Setting{
		{Env: "WEFT_PROXY_LOG_LEVEL", Default: "info", Help: "trace, debug, info, warn, error or off; Linkerd's 'warn,linkerd=info' form is accepted (its first bare level counts)"},
		{Env: "WEFT_PROXY_LOG_FORMAT", Default: "plain", Help: "plain or json"},
	}
}

// ProxySettings lists every variable ReadProxyEnv reads: the proxy's, the
// control plane's, the tracer's, then the logger's.
func ProxySettings() []dataplane.Setting {
	s := append(dataplane.Settings(), control.Settings()...)
	s = append(s, tracing.Settings()...)
	return append(s, logSettings()...)
}

// ReadProxyEnv reads every WEFT_PROXY_* variable through lookup
// (os.LookupEnv in production). Every invalid value is reported at once,
// each naming its variable and value.
func ReadProxyEnv(lookup func(string) (string, bool)) (ProxyEnv, error) {
	env := ProxyEnv{LogLevel: "info", LogFormat: "plain"}
	var errs []error
	var err error
	if env.Proxy, err = dataplane.FromEnv(lookup); err != nil {
		errs = append(errs, err)
	}
	if env.Control, err = control.FromEnv(lookup); err != nil {
		errs = append(errs, err)
	}
	if env.Trace, err = tracing.FromEnv(lookup); err != nil {
		errs = append(errs, err)
	}
	env.Trace.Pod, env.Trace.Namespace = env.Control.Pod, env.Control.Namespace
	bad := func(name, val string, err error) {
		errs = append(errs, fmt.Errorf("proxycmd: %s=%q: %w", name, val, err))
	}
	if v, ok := lookup("WEFT_PROXY_LOG_LEVEL"); ok && strings.TrimSpace(v) != "" {
		if _, err := parseLogLevel(v); err != nil {
			bad("WEFT_PROXY_LOG_LEVEL", v, err)
		} else {
			env.LogLevel = strings.TrimSpace(v)
		}
	}
	if v, ok := lookup("WEFT_PROXY_LOG_FORMAT"); ok && strings.TrimSpace(v) != "" {
		switch f := strings.ToLower(strings.TrimSpace(v)); f {
		case "plain", "json":
			env.LogFormat = f
		default:
			bad("WEFT_PROXY_LOG_FORMAT", v, errors.New("want plain or json"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ProxyEnv{}, err
	}
	return env, nil
}

// parseLogLevel maps a level (or Linkerd's "level,target=level" directive
// list, whose first bare level counts) to a slog level. "off" is above
// every level.
func parseLogLevel(s string) (slog.Level, error) {
	level := ""
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if target, lvl, ok := strings.Cut(part, "="); ok {
			if target == "" {
				return 0, fmt.Errorf("directive %q has no target", part)
			}
			if _, err := levelOf(lvl); err != nil {
				return 0, err
			}
			continue
		}
		if level == "" {
			level = part
		}
	}
	if level == "" {
		level = "info"
	}
	return levelOf(level)
}

func levelOf(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	case "off":
		return slog.LevelError + 100, nil
	}
	return 0, fmt.Errorf("unknown level %q (want trace, debug, info, warn, error or off)", s)
}
