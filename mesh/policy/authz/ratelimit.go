package authz

import (
	"fmt"
	"strings"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
)

// RateLimit is the HTTP request rate limit of a server (Linkerd's
// HTTPLocalRateLimitPolicy), as the Inbound API carries it. Every limit is
// a sustained rate in requests per second that also admits a burst of as
// many requests at once; 0 means no limit.
//
// A request is counted against Total first (even when a later limit then
// refuses it, as Linkerd's proxy does); then, if the client's identity is
// listed in an override, against that override's limit, which replaces
// the identity limit; otherwise against the client's own Identity limit.
// Clients without a mesh identity share one identity limit.
type RateLimit struct {
	// Meta is the HTTPLocalRateLimitPolicy.
	Meta Meta
	// Total limits all requests to the server together.
	Total uint32
	// Identity limits each client identity on its own.
	Identity uint32
	// Overrides give particular identities a limit that replaces Identity.
	Overrides []RateLimitOverride
}

// RateLimitOverride is a limit shared by the listed identities.
type RateLimitOverride struct {
	RequestsPerSecond uint32
	// Identities are mesh identity names, matched exactly.
	Identities []string
}

// RateLimitScope says which limit applies to a request.
type RateLimitScope uint8

// Scopes of a rate limit.
const (
	// ScopeNone: no limit applies (besides the total, if any).
	ScopeNone RateLimitScope = iota
	// ScopeTotal: the server's total limit.
	ScopeTotal
	// ScopeIdentity: the client's own per-identity limit.
	ScopeIdentity
	// ScopeOverride: an override naming the client's identity.
	ScopeOverride
)

// String returns "none", "total", "identity" or "override".
func (s RateLimitScope) String() string {
	switch s {
	case ScopeTotal:
		return "total"
	case ScopeIdentity:
		return "identity"
	case ScopeOverride:
		return "override"
	}
	return "none"
}

// ClientLimit returns the limit that applies to one client on its own
// besides the total: an override listing its identity, else the identity
// limit (shared by every client without an identity, identity ""). It
// returns ScopeNone and 0 when neither applies.
func (r *RateLimit) ClientLimit(identity string) (RateLimitScope, uint32) {
	if identity != "" {
		for _, o := range r.Overrides {
			for _, id := range o.Identities {
				if id == identity {
					return ScopeOverride, o.RequestsPerSecond
				}
			}
		}
	}
	if r.Identity > 0 {
		return ScopeIdentity, r.Identity
	}
	return ScopeNone, 0
}

// String describes the limits: "HTTPLocalRateLimitPolicy my-app/rl: total
// 100/s, per identity 10/s, 1 override".
func (r *RateLimit) String() string {
	var parts []string
	if r.Total > 0 {
		parts = append(parts, fmt.Sprintf("total %d/s", r.Total))
	}
	if r.Identity > 0 {
		parts = append(parts, fmt.Sprintf("per identity %d/s", r.Identity))
	}
	switch n := len(r.Overrides); n {
	case 0:
	case 1:
		parts = append(parts, "1 override")
	default:
		parts = append(parts, fmt.Sprintf("%d overrides", n))
	}
	if len(parts) == 0 {
		parts = append(parts, "no limits")
	}
	return r.Meta.String() + ": " + strings.Join(parts, ", ")
}

// Validate checks what a proxy relies on: every override has a limit and
// identities, and no identity is in two overrides.
func (r *RateLimit) Validate() error {
	seen := map[string]bool{}
	for i, o := range r.Overrides {
		if o.RequestsPerSecond == 0 {
			return fmt.Errorf("rate limit %s: override %d has no limit", r.Meta, i)
		}
		if len(o.Identities) == 0 {
			return fmt.Errorf("rate limit %s: override %d names no identity", r.Meta, i)
		}
		for _, id := range o.Identities {
			if id == "" {
				return fmt.Errorf("rate limit %s: override %d: empty identity", r.Meta, i)
			}
			if seen[id] {
				return fmt.Errorf("rate limit %s: identity %q is in more than one override", r.Meta, id)
			}
			seen[id] = true
		}
	}
	return nil
}

// rateLimitToProto converts r; Linkerd's controller names the policy by
// group, kind and name only.
func rateLimitToProto(r *RateLimit) *inbound.HttpLocalRateLimit {
	if r == nil {
		return nil
	}
	m := r.Meta
	pr := &inbound.HttpLocalRateLimit{}
	if m.Default != "" {
		pr.Metadata = &meta.Metadata{Kind: &meta.Metadata_Default{Default: m.Default}}
	} else {
		pr.Metadata = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: m.Group, Kind: m.Kind, Name: m.Name}}}
	}
	if r.Total > 0 {
		pr.Total = &inbound.HttpLocalRateLimit_Limit{RequestsPerSecond: r.Total}
	}
	if r.Identity > 0 {
		pr.Identity = &inbound.HttpLocalRateLimit_Limit{RequestsPerSecond: r.Identity}
	}
	for _, o := range r.Overrides {
		po := &inbound.HttpLocalRateLimit_Override{
			Limit:   &inbound.HttpLocalRateLimit_Limit{RequestsPerSecond: o.RequestsPerSecond},
			Clients: &inbound.HttpLocalRateLimit_Override_ClientIdentities{},
		}
		for _, id := range o.Identities {
			po.Clients.Identities = append(po.Clients.Identities, &inbound.Identity{Name: id})
		}
		pr.Overrides = append(pr.Overrides, po)
	}
	return pr
}

// RateLimitFromProto decodes an HttpLocalRateLimit strictly: unknown
// fields (a newer control plane's limits), an override without a limit or
// identities, an empty identity, or an identity in two overrides are
// errors, so that a proxy keeps its last good policy rather than enforce
// part of one. A missing or zero total or identity limit means none, as
// in Linkerd. nil decodes to nil.
func RateLimitFromProto(pr *inbound.HttpLocalRateLimit) (*RateLimit, error) {
	r, err := rateLimitFromProto(pr)
	if err != nil {
		return nil, fmt.Errorf("authz: %w", err)
	}
	return r, nil
}

func rateLimitFromProto(pr *inbound.HttpLocalRateLimit) (*RateLimit, error) {
	if pr == nil {
		return nil, nil
	}
	if err := unknownFields(pr); err != nil {
		return nil, fmt.Errorf("rate limit: %w", err)
	}
	r := &RateLimit{}
	if pr.Metadata != nil {
		md, err := metaFromProto(pr.Metadata)
		if err != nil {
			return nil, fmt.Errorf("rate limit: %w", err)
		}
		r.Meta = md
	} else {
		r.Meta = Meta{Default: "unnamed"}
	}
	r.Total = pr.GetTotal().GetRequestsPerSecond()
	r.Identity = pr.GetIdentity().GetRequestsPerSecond()
	for _, po := range pr.Overrides {
		o := RateLimitOverride{RequestsPerSecond: po.GetLimit().GetRequestsPerSecond()}
		for _, id := range po.GetClients().GetIdentities() {
			o.Identities = append(o.Identities, id.GetName())
		}
		r.Overrides = append(r.Overrides, o)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}
