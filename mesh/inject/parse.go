package inject

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/weftmesh/weft/apis/vocab"
)

// PortRange is an inclusive range of TCP ports; a single port has From == To.
type PortRange struct {
	From, To uint16
}

// PortRanges is a sorted list of disjoint, non-adjacent port ranges, as
// returned by [ParsePorts].
type PortRanges []PortRange

// ParsePorts parses the port-list syntax of the skip-ports and opaque-ports
// annotations: comma-separated entries, each a port ("8080"), a range
// ("9000-9100") or, when named is not nil, the name of a container port
// ("mysql"). Spaces around entries are ignored. The result is sorted with
// duplicates and overlapping ranges merged.
// An empty string is an empty list.
func ParsePorts(s string, named map[string]int32) (PortRanges, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out PortRanges
	for i, raw := range strings.Split(s, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			return nil, fmt.Errorf("entry %d is empty", i+1)
		}
		r, err := parsePortEntry(entry, named)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out.normalize(), nil
}

func parsePortEntry(entry string, named map[string]int32) (PortRange, error) {
	if from, to, ok := strings.Cut(entry, "-"); ok && isDigits(from) {
		lo, err := parsePort(from)
		if err != nil {
			return PortRange{}, fmt.Errorf("range %q: %w", entry, err)
		}
		hi, err := parsePort(to)
		if err != nil {
			return PortRange{}, fmt.Errorf("range %q: %w", entry, err)
		}
		if lo > hi {
			return PortRange{}, fmt.Errorf("range %q is backwards (%d > %d)", entry, lo, hi)
		}
		return PortRange{From: lo, To: hi}, nil
	}
	if isDigits(entry) {
		p, err := parsePort(entry)
		if err != nil {
			return PortRange{}, err
		}
		return PortRange{From: p, To: p}, nil
	}
	if named != nil {
		if p, ok := named[entry]; ok {
			return PortRange{From: uint16(p), To: uint16(p)}, nil
		}
		return PortRange{}, fmt.Errorf("%q is neither a port number nor the name of a container port of this pod", entry)
	}
	return PortRange{}, fmt.Errorf("%q is not a port number or range", entry)
}

func parsePort(s string) (uint16, error) {
	if !isDigits(s) {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s is not a port (1-65535)", s)
	}
	return uint16(n), nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (r PortRanges) normalize() PortRanges {
	if len(r) == 0 {
		return nil
	}
	s := slices.Clone(r)
	sort.Slice(s, func(i, j int) bool { return s[i].From < s[j].From })
	out := PortRanges{s[0]}
	for _, cur := range s[1:] {
		last := &out[len(out)-1]
		if cur.From <= last.To {
			if cur.To > last.To {
				last.To = cur.To
			}
			continue
		}
		out = append(out, cur)
	}
	return out
}

// String prints the list in the annotation syntax ("25,587,1000-2000").
func (r PortRanges) String() string {
	var b strings.Builder
	for i, pr := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(pr.From)))
		if pr.To != pr.From {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(pr.To)))
		}
	}
	return b.String()
}

// Contains reports whether port p is in the list.
func (r PortRanges) Contains(p int32) bool {
	for _, pr := range r {
		if p >= int32(pr.From) && p <= int32(pr.To) {
			return true
		}
	}
	return false
}

// parseSubnets parses a comma-separated list of CIDRs.
func parseSubnets(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for i, raw := range strings.Split(s, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			return nil, fmt.Errorf("entry %d is empty", i+1)
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", entry)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%q has host bits set (did you mean %s?)", entry, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

func subnetsString(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// parseQuantity parses a non-negative Kubernetes quantity.
func parseQuantity(s string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a quantity", s)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("%q is negative", s)
	}
	return q, nil
}

// parseResources turns Values resources into Kubernetes requirements,
// checking that no request exceeds its limit.
func parseResources(r Resources) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	var errs []error
	for _, e := range []struct {
		name corev1.ResourceName
		res  Resource
	}{{corev1.ResourceCPU, r.CPU}, {corev1.ResourceMemory, r.Memory}, {corev1.ResourceEphemeralStorage, r.EphemeralStorage}} {
		var req, lim *resource.Quantity
		if e.res.Request != "" {
			q, err := parseQuantity(e.res.Request)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s request: %w", e.name, err))
			} else {
				req = &q
			}
		}
		if e.res.Limit != "" {
			q, err := parseQuantity(e.res.Limit)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s limit: %w", e.name, err))
			} else {
				lim = &q
			}
		}
		if req != nil && lim != nil && req.Cmp(*lim) > 0 {
			errs = append(errs, fmt.Errorf("%s request %s exceeds limit %s", e.name, req, lim))
		}
		if req != nil {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[e.name] = *req
		}
		if lim != nil {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[e.name] = *lim
		}
	}
	return out, errors.Join(errs...)
}

// Log levels of the proxy's filter syntax.
func isLogLevel(s string) bool {
	switch strings.ToLower(s) {
	case "trace", "debug", "info", "warn", "error", "off":
		return true
	}
	return false
}

var logTargetRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$`)

// checkLogLevel validates the proxy's log filter: comma-separated
// directives, each a level ("info"), a target ("linkerd") or
// target=level ("linkerd=info").
func checkLogLevel(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty log level")
	}
	if len(s) > 1024 {
		return fmt.Errorf("log level is %d bytes long (at most 1024)", len(s))
	}
	for i, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			return fmt.Errorf("directive %d is empty", i+1)
		}
		target, level, hasLevel := strings.Cut(d, "=")
		if hasLevel {
			if !logTargetRE.MatchString(target) {
				return fmt.Errorf("directive %q: %q is not a log target", d, target)
			}
			if !isLogLevel(level) {
				return fmt.Errorf("directive %q: %q is not a level (trace, debug, info, warn, error, off)", d, level)
			}
			continue
		}
		if !isLogLevel(d) && !logTargetRE.MatchString(d) {
			return fmt.Errorf("directive %q is neither a level nor a log target", d)
		}
	}
	return nil
}

func parseLogFormat(s string) (string, error) {
	switch s {
	case vocab.LogFormatPlain, vocab.LogFormatJSON:
		return s, nil
	}
	return "", fmt.Errorf("%q is not a log format (plain, json)", s)
}

func parseInboundPolicy(s string) (string, error) {
	switch s {
	case vocab.PolicyAllUnauthenticated, vocab.PolicyAllAuthenticated, vocab.PolicyClusterAuthenticated,
		vocab.PolicyClusterUnauthenticated, vocab.PolicyDeny, vocab.PolicyAudit:
		return s, nil
	}
	return "", fmt.Errorf("%q is not a default inbound policy (all-unauthenticated, all-authenticated, cluster-authenticated, cluster-unauthenticated, deny, audit)", s)
}

func parsePullPolicy(s string) (corev1.PullPolicy, error) {
	switch p := corev1.PullPolicy(s); p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return p, nil
	}
	return "", fmt.Errorf("%q is not a pull policy (Always, IfNotPresent, Never)", s)
}

// parseInjectMode parses the value of linkerd.io/inject.
func parseInjectMode(s string) (string, error) {
	switch s {
	case vocab.InjectEnabled, vocab.InjectDisabled, vocab.InjectIngress:
		return s, nil
	}
	return "", fmt.Errorf("%q is not one of enabled, disabled, ingress", s)
}

// parseEnabled parses "enabled"/"disabled".
func parseEnabled(s string) (bool, error) {
	switch s {
	case "enabled":
		return true, nil
	case "disabled":
		return false, nil
	}
	return false, fmt.Errorf("%q is not enabled or disabled", s)
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%q is not true or false", s)
	}
	return b, nil
}

// parseDuration accepts Go durations ("30s", "2m"); a bare number is not
// accepted because its unit would be a guess.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (for example 30s or 2m)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

func parseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<31-1 {
		return 0, fmt.Errorf("%q is not a user or group ID", s)
	}
	return n, nil
}

func parseSeconds(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<31-1 {
		return 0, fmt.Errorf("%q is not a number of seconds", s)
	}
	return n, nil
}

func isDNSLabel(s string) bool  { return len(validation.IsDNS1123Label(s)) == 0 }
func isDNSName(s string) bool   { return len(validation.IsDNS1123Subdomain(s)) == 0 }
func isImageTag(s string) bool  { return imageTagRE.MatchString(s) }
func isImageName(s string) bool { return len(s) <= 512 && imageNameRE.MatchString(s) }

var (
	imageTagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	imageNameRE = regexp.MustCompile(`^[A-Za-z0-9]+([._-][A-Za-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(@sha256:[a-f0-9]{64})?$`)
)

func sortErrors(errs []error) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}
