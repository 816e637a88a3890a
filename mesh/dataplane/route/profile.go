package route

import (
	"errors"
	"fmt"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
)

// maxProfileRetries bounds retries of ServiceProfile routes, which have
// no count of their own (only the budget).
const maxProfileRetries = 3

func (r *Router) compileProfile(p *destination.DestinationProfile) error {
	if p.GetOpaqueProtocol() {
		r.Opaque = true
	}
	if b := p.GetRetryBudget(); b != nil {
		r.Budget = retry.BudgetOptions{Ratio: float64(b.GetRetryRatio()), MinPerSecond: b.GetMinRetriesPerSecond(), TTL: b.GetTtl().AsDuration()}
	}
	for _, o := range p.GetDstOverrides() {
		if o.GetAuthority() == "" {
			return errors.New("traffic split override without an authority")
		}
		r.split = append(r.split, Backend{Name: metaName(o.GetBackendRef(), o.GetAuthority()), Weight: o.GetWeight(), Authority: o.GetAuthority()})
	}
	for i, pr := range p.GetRoutes() {
		name := pr.GetMetricsLabels()["route"]
		if name == "" {
			name = fmt.Sprintf("profile-route-%d", i)
		}
		m, err := compileRequestMatch(pr.GetCondition(), 0)
		if err != nil {
			return fmt.Errorf("route %s: %w", name, err)
		}
		rt := &Route{Name: name, Timeouts: Timeouts{Request: pr.GetTimeout().AsDuration()}}
		for _, rc := range pr.GetResponseClasses() {
			rm, err := compileResponseMatch(rc.GetCondition(), 0)
			if err != nil {
				return fmt.Errorf("route %s: %w", name, err)
			}
			rt.Classes = append(rt.Classes, ResponseClass{match: rm, Failure: rc.GetIsFailure()})
		}
		if pr.GetIsRetryable() {
			rt.Retry = &Retry{MaxRetries: maxProfileRetries, OnFailureClass: true, NonIdempotent: true}
			normalizeRetry(rt.Retry)
		}
		r.profile = append(r.profile, profileRoute{name: name, match: m, route: rt})
	}
	r.prof = len(r.profile) > 0 || len(r.split) > 0
	backends := r.split
	if len(backends) == 0 {
		backends = []Backend{{Name: r.target, Weight: 1, Authority: r.target}}
	}
	for _, pr := range r.profile {
		pr.route.Backends = backends
	}
	if r.prof {
		r.def = &Route{Name: DefaultName, Backends: backends}
	}
	return nil
}

const maxMatchDepth = 16

func compileRequestMatch(m *destination.RequestMatch, depth int) (requestMatch, error) {
	if m == nil {
		return nil, errors.New("route without a condition")
	}
	if depth > maxMatchDepth {
		return nil, errors.New("condition nested too deeply")
	}
	switch k := m.GetMatch().(type) {
	case *destination.RequestMatch_All:
		var subs []requestMatch
		for _, s := range k.All.GetMatches() {
			f, err := compileRequestMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(method, path string) bool {
			for _, f := range subs {
				if !f(method, path) {
					return false
				}
			}
			return true
		}, nil
	case *destination.RequestMatch_Any:
		var subs []requestMatch
		for _, s := range k.Any.GetMatches() {
			f, err := compileRequestMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(method, path string) bool {
			for _, f := range subs {
				if f(method, path) {
					return true
				}
			}
			return false
		}, nil
	case *destination.RequestMatch_Not:
		f, err := compileRequestMatch(k.Not, depth+1)
		if err != nil {
			return nil, err
		}
		return func(method, path string) bool { return !f(method, path) }, nil
	case *destination.RequestMatch_Path:
		re, err := anchored(k.Path.GetRegex())
		if err != nil {
			return nil, err
		}
		return func(_, path string) bool { return re.MatchString(path) }, nil
	case *destination.RequestMatch_Method:
		meth, err := methodOf(k.Method)
		if err != nil {
			return nil, err
		}
		return func(method, _ string) bool { return method == meth }, nil
	}
	return nil, errors.New("unknown request condition")
}

func compileResponseMatch(m *destination.ResponseMatch, depth int) (responseMatch, error) {
	if m == nil {
		return nil, errors.New("response class without a condition")
	}
	if depth > maxMatchDepth {
		return nil, errors.New("condition nested too deeply")
	}
	switch k := m.GetMatch().(type) {
	case *destination.ResponseMatch_All:
		var subs []responseMatch
		for _, s := range k.All.GetMatches() {
			f, err := compileResponseMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(st int) bool {
			for _, f := range subs {
				if !f(st) {
					return false
				}
			}
			return true
		}, nil
	case *destination.ResponseMatch_Any:
		var subs []responseMatch
		for _, s := range k.Any.GetMatches() {
			f, err := compileResponseMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(st int) bool {
			for _, f := range subs {
				if f(st) {
					return true
				}
			}
			return false
		}, nil
	case *destination.ResponseMatch_Not:
		f, err := compileResponseMatch(k.Not, depth+1)
		if err != nil {
			return nil, err
		}
		return func(st int) bool { return !f(st) }, nil
	case *destination.ResponseMatch_Status:
		lo, hi := int(k.Status.GetMin()), int(k.Status.GetMax())
		if hi == 0 {
			hi = 599
		}
		if lo > hi {
			return nil, fmt.Errorf("status range %d-%d", lo, hi)
		}
		return func(st int) bool { return st >= lo && st <= hi }, nil
	}
	return nil, errors.New("unknown response condition")
}
