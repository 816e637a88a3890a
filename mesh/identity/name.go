package identity

import (
	"errors"
	"fmt"
	"strings"
)

// Defaults for the installation-wide part of every identity name.
const (
	DefaultControlPlaneNamespace = "weft"
	DefaultTrustDomain           = "cluster.local"
)

// The fixed labels between a workload's service account and namespace and
// the installation's domain: <sa>.<ns>.serviceaccount.identity.<cp-ns>.<td>.
const nameInfix = ".serviceaccount.identity."

// maxNameLength bounds a formatted name; a DNS name cannot be longer.
const maxNameLength = 253

// ErrInvalidName is wrapped by every error about a malformed identity name.
var ErrInvalidName = errors.New("invalid identity name")

// Domain is the part of every identity name fixed by the installation: the
// namespace the control plane runs in and the trust domain. Two
// installations with different domains never accept each other's names.
type Domain struct {
	// ControlPlaneNamespace is the Kubernetes namespace of the control
	// plane (DefaultControlPlaneNamespace when empty).
	ControlPlaneNamespace string
	// TrustDomain is the DNS-like suffix shared by all names
	// (DefaultTrustDomain when empty).
	TrustDomain string
}

// DefaultDomain returns the domain used when nothing is configured:
// control-plane namespace "weft", trust domain "cluster.local".
func DefaultDomain() Domain {
	return Domain{ControlPlaneNamespace: DefaultControlPlaneNamespace, TrustDomain: DefaultTrustDomain}
}

// withDefaults fills empty fields with their defaults.
func (d Domain) withDefaults() Domain {
	if d.ControlPlaneNamespace == "" {
		d.ControlPlaneNamespace = DefaultControlPlaneNamespace
	}
	if d.TrustDomain == "" {
		d.TrustDomain = DefaultTrustDomain
	}
	return d
}

// Validate reports whether both parts of d are well formed: the
// control-plane namespace a DNS-1123 label, the trust domain a lower-case
// DNS name.
func (d Domain) Validate() error {
	if err := checkLabel(d.ControlPlaneNamespace); err != nil {
		return fmt.Errorf("identity: control-plane namespace %q: %w", d.ControlPlaneNamespace, err)
	}
	if err := checkSubdomain(d.TrustDomain); err != nil {
		return fmt.Errorf("identity: trust domain %q: %w", d.TrustDomain, err)
	}
	return nil
}

// Name builds the identity of service account serviceAccount in namespace
// namespace under d (empty fields of d take their defaults).
func (d Domain) Name(namespace, serviceAccount string) (Name, error) {
	n := Name{ServiceAccount: serviceAccount, Namespace: namespace, Domain: d.withDefaults()}
	if err := n.Validate(); err != nil {
		return Name{}, err
	}
	return n, nil
}

// ParseSPIFFE parses the SPIFFE form spiffe://<trust-domain>/ns/<ns>/sa/<sa>.
// The trust domain must be d's; the control-plane namespace, which the
// SPIFFE form does not carry, is taken from d.
func (d Domain) ParseSPIFFE(s string) (Name, error) {
	d = d.withDefaults()
	rest, ok := strings.CutPrefix(s, "spiffe://")
	if !ok {
		return Name{}, fmt.Errorf("identity: SPIFFE ID %q: want the spiffe:// scheme: %w", s, ErrInvalidName)
	}
	td, path, ok := strings.Cut(rest, "/")
	if !ok {
		return Name{}, fmt.Errorf("identity: SPIFFE ID %q: missing path: %w", s, ErrInvalidName)
	}
	if td != d.TrustDomain {
		return Name{}, fmt.Errorf("identity: SPIFFE ID %q: trust domain %q, want %q: %w", s, td, d.TrustDomain, ErrInvalidName)
	}
	parts := strings.Split(path, "/")
	if len(parts) != 4 || parts[0] != "ns" || parts[2] != "sa" {
		return Name{}, fmt.Errorf("identity: SPIFFE ID %q: want path /ns/<namespace>/sa/<serviceaccount>: %w", s, ErrInvalidName)
	}
	return d.Name(parts[1], parts[3])
}

// Name is a workload identity: a Kubernetes service account in a namespace,
// within an installation's Domain. Its text form is
// <sa>.<ns>.serviceaccount.identity.<control-plane-ns>.<trust-domain>, the
// single DNS SAN of every workload certificate. Names are comparable with ==.
type Name struct {
	ServiceAccount string
	Namespace      string
	Domain         Domain
}

// ParseName parses the text form of an identity name and validates it.
// Service-account names may contain dots; namespaces and the control-plane
// namespace may not, which makes the split unambiguous.
func ParseName(s string) (Name, error) {
	if s == "" {
		return Name{}, fmt.Errorf("identity: empty name: %w", ErrInvalidName)
	}
	if len(s) > maxNameLength {
		return Name{}, fmt.Errorf("identity: name of %d bytes exceeds %d: %w", len(s), maxNameLength, ErrInvalidName)
	}
	workload, domain, ok := strings.Cut(s, nameInfix)
	if !ok {
		return Name{}, fmt.Errorf("identity: name %q: want <sa>.<ns>%s<control-plane-ns>.<trust-domain>: %w", s, nameInfix, ErrInvalidName)
	}
	i := strings.LastIndexByte(workload, '.')
	if i < 0 {
		return Name{}, fmt.Errorf("identity: name %q: missing the service account or namespace: %w", s, ErrInvalidName)
	}
	cp, td, ok := strings.Cut(domain, ".")
	if !ok {
		return Name{}, fmt.Errorf("identity: name %q: missing the control-plane namespace or trust domain: %w", s, ErrInvalidName)
	}
	n := Name{
		ServiceAccount: workload[:i],
		Namespace:      workload[i+1:],
		Domain:         Domain{ControlPlaneNamespace: cp, TrustDomain: td},
	}
	if err := n.Validate(); err != nil {
		return Name{}, err
	}
	return n, nil
}

// Validate reports whether every part of n is well formed.
func (n Name) Validate() error {
	if err := checkSubdomain(n.ServiceAccount); err != nil {
		return fmt.Errorf("identity: service account %q: %w", n.ServiceAccount, err)
	}
	if err := checkLabel(n.Namespace); err != nil {
		return fmt.Errorf("identity: namespace %q: %w", n.Namespace, err)
	}
	if err := n.Domain.Validate(); err != nil {
		return err
	}
	if l := len(n.String()); l > maxNameLength {
		return fmt.Errorf("identity: name of %d bytes exceeds %d: %w", l, maxNameLength, ErrInvalidName)
	}
	return nil
}

// IsZero reports whether n is the zero Name.
func (n Name) IsZero() bool { return n == Name{} }

// String formats n as <sa>.<ns>.serviceaccount.identity.<cp-ns>.<trust-domain>.
func (n Name) String() string {
	if n.IsZero() {
		return ""
	}
	return n.ServiceAccount + "." + n.Namespace + nameInfix + n.Domain.ControlPlaneNamespace + "." + n.Domain.TrustDomain
}

// SPIFFEID formats n as spiffe://<trust-domain>/ns/<ns>/sa/<sa>.
func (n Name) SPIFFEID() string {
	if n.IsZero() {
		return ""
	}
	return "spiffe://" + n.Domain.TrustDomain + "/ns/" + n.Namespace + "/sa/" + n.ServiceAccount
}

// checkLabel validates a DNS-1123 label: 1-63 characters of [a-z0-9-],
// starting and ending with an alphanumeric.
func checkLabel(s string) error {
	if s == "" {
		return fmt.Errorf("empty: %w", ErrInvalidName)
	}
	if len(s) > 63 {
		return fmt.Errorf("longer than 63 characters: %w", ErrInvalidName)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return fmt.Errorf("character %q at %d not allowed in a DNS-1123 label: %w", c, i, ErrInvalidName)
		}
	}
	return nil
}

// checkSubdomain validates a DNS-1123 subdomain: dot-separated labels, at
// most 253 characters.
func checkSubdomain(s string) error {
	if s == "" {
		return fmt.Errorf("empty: %w", ErrInvalidName)
	}
	if len(s) > maxNameLength {
		return fmt.Errorf("longer than %d characters: %w", maxNameLength, ErrInvalidName)
	}
	// Label by label without splitting into a slice: peer verification
	// parses a name on every handshake.
	for rest, more := s, true; more; {
		var l string
		l, rest, more = strings.Cut(rest, ".")
		if err := checkLabel(l); err != nil {
			return err
		}
	}
	return nil
}
