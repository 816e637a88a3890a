package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spf13/pflag"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// proxyFlag is one of `linkerd inject`'s per-setting flags and the
// annotation it becomes.
type proxyFlag struct {
	name, annotation, usage string
	kind                    flagKind
	deprecated              string // the flag to use instead
}

type flagKind int

const (
	kindString flagKind = iota
	kindPort
	kindInt
	kindList
	kindBool
	kindDuration
)

// proxyFlagTable lists linkerd inject's per-setting flags (cli/cmd/options.go
// of linkerd2: the proxy flags shared with install, and the inject-only
// ones), each with the config annotation it sets.
func proxyFlagTable() []proxyFlag {
	return []proxyFlag{
		{name: "proxy-image", annotation: vocab.AnnotationProxyImage, usage: "proxy image name (without tag)"},
		{name: "image-pull-policy", annotation: vocab.AnnotationImagePullPolicy, usage: "pull policy of the proxy and init images: Always, IfNotPresent or Never"},
		{name: "inbound-port", annotation: vocab.AnnotationInboundPort, kind: kindPort, usage: "proxy port for inbound traffic"},
		{name: "outbound-port", annotation: vocab.AnnotationOutboundPort, kind: kindPort, usage: "proxy port for outbound traffic"},
		{name: "admin-port", annotation: vocab.AnnotationAdminPort, kind: kindPort, usage: "proxy port for /live, /ready and /metrics"},
		{name: "control-port", annotation: vocab.AnnotationControlPort, kind: kindPort, usage: "proxy control port (never redirected)"},
		{name: "skip-inbound-ports", annotation: vocab.AnnotationSkipInboundPorts, kind: kindList, usage: "ports and ranges (8443,9000-9100) whose inbound traffic skips the proxy; replaces the default 4567,4568"},
		{name: "skip-outbound-ports", annotation: vocab.AnnotationSkipOutboundPorts, kind: kindList, usage: "ports and ranges whose outbound traffic skips the proxy; replaces the default 4567,4568"},
		{name: "proxy-uid", annotation: vocab.AnnotationProxyUID, kind: kindInt, usage: "user ID the proxy runs as"},
		{name: "proxy-gid", annotation: vocab.AnnotationProxyGID, kind: kindInt, usage: "group ID the proxy runs as"},
		{name: "proxy-log-level", annotation: vocab.AnnotationProxyLogLevel, usage: "proxy log filter (warn,linkerd=info)"},
		{name: "proxy-cpu-request", annotation: vocab.AnnotationProxyCPURequest, usage: "CPU the proxy requests (100m)"},
		{name: "proxy-cpu-limit", annotation: vocab.AnnotationProxyCPULimit, usage: "CPU the proxy may use at most"},
		{name: "proxy-memory-request", annotation: vocab.AnnotationProxyMemoryRequest, usage: "memory the proxy requests (64Mi)"},
		{name: "proxy-memory-limit", annotation: vocab.AnnotationProxyMemoryLimit, usage: "memory the proxy may use at most"},
		{name: "proxy-cpu", annotation: vocab.AnnotationProxyCPURequest, usage: "deprecated: use --proxy-cpu-request", deprecated: "--proxy-cpu-request"},
		{name: "proxy-memory", annotation: vocab.AnnotationProxyMemoryRequest, usage: "deprecated: use --proxy-memory-request", deprecated: "--proxy-memory-request"},
		{name: "enable-external-profiles", annotation: vocab.AnnotationEnableExternalProfiles, kind: kindBool, usage: "accepted for Linkerd compatibility; Weft's proxy already looks up profiles for every destination"},
		{name: "default-inbound-policy", annotation: vocab.AnnotationDefaultInboundPolicy, usage: "policy for ports no Server selects (all-unauthenticated, all-authenticated, cluster-authenticated, cluster-unauthenticated, deny, audit)"},
		{name: "proxy-version", annotation: vocab.AnnotationProxyVersionOverride, usage: "proxy image tag"},
		{name: "native-sidecar", annotation: vocab.AnnotationNativeSidecar, kind: kindBool, usage: "inject the proxy as a native sidecar (init container with restartPolicy Always)"},
		{name: "wait-before-exit-seconds", annotation: vocab.AnnotationWaitBeforeExitSeconds, kind: kindInt, usage: "seconds the proxy stays up after the pod starts terminating"},
		{name: "require-identity-on-inbound-ports", annotation: vocab.AnnotationRequireIdentityInboundPorts, kind: kindList, usage: "inbound ports that refuse clients without a mesh identity"},
		{name: "opaque-ports", annotation: vocab.AnnotationOpaquePorts, kind: kindList, usage: "ports, ranges or container port names that skip protocol detection (also set on Services)"},
		{name: "enable-debug-sidecar", annotation: vocab.AnnotationEnableDebugSidecar, kind: kindBool, usage: "add the debug sidecar (image from Values debugContainer.image)"},
		{name: "close-wait-timeout", annotation: vocab.AnnotationCloseWaitTimeout, kind: kindDuration, usage: "set the pod's nf_conntrack_tcp_timeout_close_wait (makes weft-init privileged)"},
	}
}

// proxyFlags holds the registered flags until they are read.
type proxyFlags struct {
	fs       *FlagSet
	table    []proxyFlag
	strs     map[string]*string
	bools    map[string]*bool
	lists    map[string]*StringList
	registry *string
	ingress  *bool
	noID     *bool
}

// addProxyFlags registers linkerd inject's per-setting flags on fs.
func addProxyFlags(fs *FlagSet) *proxyFlags {
	pf := &proxyFlags{fs: fs, table: proxyFlagTable(), strs: map[string]*string{}, bools: map[string]*bool{}, lists: map[string]*StringList{}}
	for _, f := range pf.table {
		switch f.kind {
		case kindBool:
			pf.bools[f.name] = fs.Bool(f.name, false, f.usage)
		case kindList:
			l := &StringList{}
			fs.Var(l, f.name, f.usage+" (repeatable, comma-separated)")
			pf.lists[f.name] = l
		default:
			short := ""
			if f.name == "proxy-version" {
				short = "v" // linkerd inject's -v
			}
			pf.strs[f.name] = fs.StringP(f.name, short, "", f.usage)
		}
	}
	pf.registry = fs.String("registry", "", "registry to pull the proxy, init and debug images from (replaces the registry part of their names)")
	pf.ingress = fs.Bool("ingress", false, "inject the proxy in ingress mode (linkerd.io/inject: ingress)")
	pf.noID = fs.Bool("disable-identity", false, "not supported: identity is always on")
	return pf
}

var (
	portListEntryRE = regexp.MustCompile(`^([0-9]{1,5}(-[0-9]{1,5})?|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`)
)

// annotations returns the annotations of the flags set on the command
// line, each checked as the renderer will check it; errors name the flag.
// Deprecation notes go to warn.
func (pf *proxyFlags) annotations(values inject.Values, warn io.Writer) (map[string]string, error) {
	set := map[string]bool{}
	pf.fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	out := map[string]string{}
	var errs []error
	if set["disable-identity"] && *pf.noID {
		errs = append(errs, errors.New("--disable-identity is not supported: identity is always on (Linkerd no longer supports it either)"))
	}
	for _, f := range pf.table {
		if !set[f.name] {
			continue
		}
		var val string
		switch f.kind {
		case kindBool:
			val = strconv.FormatBool(*pf.bools[f.name])
		case kindList:
			for _, e := range *pf.lists[f.name] {
				if !portListEntryRE.MatchString(e) {
					errs = append(errs, fmt.Errorf("--%s: %q is not a port, range or container port name", f.name, e))
				}
			}
			val = strings.Join(*pf.lists[f.name], ",")
		case kindPort, kindInt:
			val = strings.TrimSpace(*pf.strs[f.name])
			if _, err := strconv.ParseInt(val, 10, 64); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %q is not a number", f.name, val))
				continue
			}
		case kindDuration:
			val = strings.TrimSpace(*pf.strs[f.name])
		default:
			val = strings.TrimSpace(*pf.strs[f.name])
		}
		if f.deprecated != "" {
			fmt.Fprintf(warn, "weft inject: warning: --%s is deprecated, use %s\n", f.name, f.deprecated)
		}
		out[f.annotation] = val
	}
	if set["ingress"] && *pf.ingress {
		out[vocab.AnnotationInject] = vocab.InjectIngress
	}
	if reg := strings.TrimSuffix(strings.TrimSpace(*pf.registry), "/"); set["registry"] && reg != "" {
		for key, name := range map[string]string{vocab.AnnotationProxyImage: values.Proxy.Image.Name, vocab.AnnotationInitImage: values.ProxyInit.Image.Name, vocab.AnnotationDebugImage: values.DebugContainer.Image.Name} {
			if _, explicit := out[key]; !explicit {
				out[key] = reg + "/" + path.Base(name)
			}
		}
	}
	// Each value is checked by resolving a pod that carries it, so a bad
	// flag fails now, naming the flag, and not once per workload.
	flagOf := map[string]string{vocab.AnnotationInject: "--ingress"}
	for _, f := range pf.table {
		if set[f.name] {
			flagOf[f.annotation] = "--" + f.name
		}
	}
	if set["registry"] {
		for _, k := range []string{vocab.AnnotationProxyImage, vocab.AnnotationInitImage, vocab.AnnotationDebugImage} {
			if _, ok := flagOf[k]; !ok {
				flagOf[k] = "--registry"
			}
		}
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == vocab.AnnotationInject || k == vocab.AnnotationOpaquePorts || k == vocab.AnnotationRequireIdentityInboundPorts {
			continue // names are checked per workload, against its ports
		}
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "flags", Annotations: map[string]string{k: out[k]}}}
		if _, err := inject.Resolve(probe, nil, values); err != nil {
			var ae *inject.AnnotationError
			if errors.As(err, &ae) {
				errs = append(errs, fmt.Errorf("%s %q: %v", flagOf[k], out[k], ae.Err))
			} else {
				errs = append(errs, fmt.Errorf("%s %q: %v", flagOf[k], out[k], err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// readLinkerdValues applies a linkerd-control-plane values file onto base
// and prints what was and was not mapped.
func readLinkerdValues(prog, file string, base inject.Values, w io.Writer) (*install.LinkerdValues, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--linkerd-values: %w", err)
	}
	lv, err := install.FromLinkerdValues(base, data)
	if err != nil {
		return nil, fmt.Errorf("--linkerd-values %s: %w", file, err)
	}
	fmt.Fprintf(w, "%s: --linkerd-values %s: %d keys mapped, %d not\n", prog, file, len(lv.Mapped), len(lv.NotMapped))
	if len(lv.Mapped) > 0 {
		fmt.Fprintf(w, "  mapped: %s\n", strings.Join(lv.Mapped, ", "))
	}
	byReason := map[string][]string{}
	var reasons []string
	for _, n := range lv.NotMapped {
		if _, ok := byReason[n.Reason]; !ok {
			reasons = append(reasons, n.Reason)
		}
		byReason[n.Reason] = append(byReason[n.Reason], n.Key)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  not mapped (%s): %s\n", r, strings.Join(byReason[r], ", "))
	}
	return lv, nil
}
