package policy

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// rateLimitSpec is a translated HTTPLocalRateLimitPolicy.
type rateLimitSpec struct {
	ref    ObjectRef
	obj    *v1alpha1.HTTPLocalRateLimitPolicy
	server string // the target Server, in the policy's namespace
	limit  authz.RateLimit
	// serviceAccounts are the ServiceAccounts the overrides name, for the
	// lint that they exist.
	serviceAccounts []nsName
}

// translateRateLimit checks one HTTPLocalRateLimitPolicy with the rules
// of Linkerd's admission webhook, which are ours wherever the object
// arrives (webhook, files, informer): the target is a Server; every
// requestsPerSecond is in 1..2^32-1 (the proxy API's range); the identity
// and override limits are at most the total, when there is one; override
// clients are ServiceAccounts. A policy that breaks one is ignored
// (SeverityError). An override naming no client is dropped with a warning,
// as it limits no one.
func translateRateLimit(cfg *Config, p *problems, rl *v1alpha1.HTTPLocalRateLimitPolicy) (*rateLimitSpec, bool) {
	ref := ObjectRef{Kind: "HTTPLocalRateLimitPolicy", Namespace: rl.Namespace, Name: rl.Name}
	spec := &rateLimitSpec{ref: ref, obj: rl, server: string(rl.Spec.TargetRef.Name)}
	ok := true
	tr := rl.Spec.TargetRef
	if g, k := string(tr.Group), string(tr.Kind); !strings.EqualFold(g, policyGroup) || !strings.EqualFold(k, "Server") {
		p.errorf(ref, "spec.targetRef", "unsupported target %s (want Server.policy.linkerd.io)", groupKind(g, k))
		ok = false
	}
	// rate checks one requestsPerSecond.
	rate := func(field string, v int64) (uint32, bool) {
		switch {
		case v < 1:
			p.errorf(ref, field, "must be greater than 0, got %d", v)
			return 0, false
		case v > math.MaxUint32:
			p.errorf(ref, field, "must be at most %d, got %d", uint32(math.MaxUint32), v)
			return 0, false
		}
		return uint32(v), true
	}
	// atMostTotal checks a limit against the total one.
	atMostTotal := func(field string, v uint32) bool {
		if spec.limit.Total > 0 && v > spec.limit.Total {
			p.errorf(ref, field, "must be less than or equal to spec.total.requestsPerSecond (%d), got %d", spec.limit.Total, v)
			return false
		}
		return true
	}
	spec.limit.Meta = authz.Meta{Group: policyGroup, Kind: "HTTPLocalRateLimitPolicy", Namespace: rl.Namespace, Name: rl.Name}
	if t := rl.Spec.Total; t != nil {
		v, good := rate("spec.total.requestsPerSecond", t.RequestsPerSecond)
		ok = ok && good
		spec.limit.Total = v
	}
	if id := rl.Spec.Identity; id != nil {
		v, good := rate("spec.identity.requestsPerSecond", id.RequestsPerSecond)
		good = good && atMostTotal("spec.identity.requestsPerSecond", v)
		ok = ok && good
		spec.limit.Identity = v
	}
	// owner remembers which override last named an identity: Linkerd's
	// proxy keeps the last override that names it.
	owner := map[string]int{}
	overrides := make([]authz.RateLimitOverride, len(rl.Spec.Overrides))
	for i, o := range rl.Spec.Overrides {
		field := fmt.Sprintf("spec.overrides[%d]", i)
		v, good := rate(field+".requestsPerSecond", o.RequestsPerSecond)
		good = good && atMostTotal(field+".requestsPerSecond", v)
		ok = ok && good
		overrides[i].RequestsPerSecond = v
		if len(o.ClientRefs) == 0 {
			p.warnf(ref, field+".clientRefs", "names no client; the override limits no one")
		}
		for j, c := range o.ClientRefs {
			cf := fmt.Sprintf("%s.clientRefs[%d]", field, j)
			if !isCoreGroup(string(c.Group)) || !strings.EqualFold(string(c.Kind), "ServiceAccount") {
				p.errorf(ref, cf, "unsupported client %s (want ServiceAccount)", groupKind(string(c.Group), string(c.Kind)))
				ok = false
				continue
			}
			if c.Name == "" {
				p.errorf(ref, cf+".name", "empty service account name")
				ok = false
				continue
			}
			ns := rl.Namespace
			if c.Namespace != nil && *c.Namespace != "" {
				ns = *c.Namespace
			}
			id := cfg.ServiceAccountIdentity(string(c.Name), ns)
			if prev, dup := owner[id]; dup && prev != i {
				p.warnf(ref, cf, "ServiceAccount %s/%s is also named by spec.overrides[%d]; the last override naming it applies, as in Linkerd", ns, c.Name, prev)
			}
			owner[id] = i
			spec.serviceAccounts = append(spec.serviceAccounts, nsName{ns, string(c.Name)})
		}
	}
	if !ok {
		return spec, false
	}
	for i, o := range overrides {
		for id, last := range owner {
			if last == i {
				o.Identities = append(o.Identities, id)
			}
		}
		if len(o.Identities) == 0 {
			continue
		}
		sort.Strings(o.Identities)
		spec.limit.Overrides = append(spec.limit.Overrides, o)
	}
	return spec, true
}

// attachRateLimits picks, for every Server, the HTTPLocalRateLimitPolicy
// that applies to it, as Linkerd's status controller accepts one: the
// oldest (a policy with a creation time before one without), then the
// first by name. The others, and policies whose Server does not exist,
// are reported and apply to nothing.
func (b *builder) attachRateLimits() {
	b.rateLimits = map[nsName]*rateLimitSpec{}
	byServer := map[nsName][]*rateLimitSpec{}
	for _, rl := range b.objs.HTTPLocalRateLimitPolicies {
		spec, ok := translateRateLimit(b.cfg, b.p, rl)
		if !ok {
			continue
		}
		for _, sa := range spec.serviceAccounts {
			if !b.serviceAccounts[sa] {
				b.p.warnf(spec.ref, "spec.overrides", "ServiceAccount %s/%s is not defined and no workload uses it", sa.ns, sa.name)
			}
		}
		k := nsName{rl.Namespace, spec.server}
		if _, found := b.serverByNm[k]; !found {
			b.p.warnf(spec.ref, "spec.targetRef", "Server %s/%s not found; the limits apply to nothing until it exists", k.ns, k.name)
			continue
		}
		byServer[k] = append(byServer[k], spec)
	}
	for k, list := range byServer {
		sort.SliceStable(list, func(i, j int) bool { return olderFirst(&list[i].obj.ObjectMeta, &list[j].obj.ObjectMeta) })
		b.rateLimits[k] = list[0]
		for _, other := range list[1:] {
			b.p.warnf(other.ref, "spec.targetRef", "Server %s/%s already has HTTPLocalRateLimitPolicy %s, which is older (or as old and first by name); only one applies, so this one applies to nothing (Linkerd: RateLimitReasonAlreadyExists)", k.ns, k.name, list[0].ref.Name)
		}
	}
}

// serverRateLimit returns the rate limit of a Server, or nil, and warns
// when the Server's protocol has no place for it in the proxy API.
func (b *builder) serverRateLimit(s *serverSpec) *authz.RateLimit {
	rl := b.rateLimits[nsName{s.obj.Namespace, s.obj.Name}]
	if rl == nil {
		return nil
	}
	switch s.protocol {
	case authz.ProtocolDetect, authz.ProtocolHTTP1, authz.ProtocolHTTP2:
		limit := rl.limit
		return &limit
	}
	b.p.warnf(rl.ref, "spec.targetRef", "Server %s/%s has proxyProtocol %s; rate limits apply only to HTTP/1, HTTP/2 and unknown (detected) protocols, as Linkerd's proxy API carries them, so these apply to nothing", s.obj.Namespace, s.obj.Name, s.protocol)
	return nil
}
