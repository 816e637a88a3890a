package policy

import (
	"fmt"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// RateLimitInfo says which rate limits count a client's requests, for
// explanations and `weft policy explain` (Result.RateLimit).
type RateLimitInfo struct {
	// Policy is the Server's HTTPLocalRateLimitPolicy.
	Policy *authz.RateLimit
	// Total is the limit all clients share, 0 for none.
	Total uint32
	// Scope and RequestsPerSecond are the limit of this client on its
	// own: an override naming its identity, its per-identity limit (the
	// one all clients without an identity share, when it has none), or
	// ScopeNone and 0.
	Scope             authz.RateLimitScope
	RequestsPerSecond uint32
	// SharedBy is how many identities an override's limit is shared by.
	SharedBy int
}

// rateLimitFor returns the limits that count the request res admitted,
// or nil. Linkerd's proxy checks them after authorization, so a refused
// request is never counted; neither are loopback clients, which skip
// policy.
func rateLimitFor(srv *authz.Server, res *Result) *RateLimitInfo {
	rl := srv.RateLimit
	if rl == nil || res.Meshed == MeshedNo || res.Reason == authz.ReasonLoopback ||
		(res.Decision != authz.Allow && res.Decision != authz.Audit) {
		return nil
	}
	info := &RateLimitInfo{Policy: rl, Total: rl.Total}
	id := res.Conn.Identity
	info.Scope, info.RequestsPerSecond = rl.ClientLimit(id)
	if info.Scope == authz.ScopeOverride {
		for _, o := range rl.Overrides {
			for _, x := range o.Identities {
				if x == id {
					info.SharedBy = len(o.Identities)
				}
			}
		}
	}
	return info
}

// String explains the limits in a sentence.
func (i *RateLimitInfo) String(identity string) string {
	var client string
	switch {
	case i.Scope == authz.ScopeOverride && i.SharedBy == 2:
		client = fmt.Sprintf("the override limit of %d/s that it shares with 1 other identity", i.RequestsPerSecond)
	case i.Scope == authz.ScopeOverride && i.SharedBy > 2:
		client = fmt.Sprintf("the override limit of %d/s that it shares with %d other identities", i.RequestsPerSecond, i.SharedBy-1)
	case i.Scope == authz.ScopeOverride:
		client = fmt.Sprintf("its override limit of %d/s", i.RequestsPerSecond)
	case i.Scope == authz.ScopeIdentity && identity == "":
		client = fmt.Sprintf("the per-identity limit of %d/s that all clients without a mesh identity share", i.RequestsPerSecond)
	case i.Scope == authz.ScopeIdentity:
		client = fmt.Sprintf("its own per-identity limit of %d/s", i.RequestsPerSecond)
	default:
		client = "no limit of its own"
	}
	total := "no total limit"
	if i.Total > 0 {
		total = fmt.Sprintf("the total limit of %d/s that all clients share", i.Total)
	}
	return fmt.Sprintf("rate limit %s: each HTTP request from this client counts against %s, then against %s; beyond them the proxy answers 429 Too Many Requests (gRPC: RESOURCE_EXHAUSTED)",
		i.Policy, total, client)
}
