package route

import (
	"errors"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/internal/routematch"
)

func compileGRPCRule(prr *outbound.GrpcRoute_Rule, name, target string) (grpcRule, error) {
	var rule grpcRule
	for _, pm := range prr.GetMatches() {
		m := routematch.GRPC{Service: pm.GetRpc().GetService(), Method: pm.GetRpc().GetMethod()}
		var err error
		if m.Headers, err = headerMatches(pm.GetHeaders()); err != nil {
			return rule, err
		}
		rule.matches = append(rule.matches, m)
	}
	rt := &Route{Name: name}
	for _, f := range prr.GetFilters() {
		switch k := f.GetKind().(type) {
		case *outbound.GrpcRoute_Filter_RequestHeaderModifier:
			m, err := headerModifier(k.RequestHeaderModifier.GetAdd(), k.RequestHeaderModifier.GetSet(), k.RequestHeaderModifier.GetRemove())
			if err != nil {
				return rule, err
			}
			rt.RequestHeaders = m
		case *outbound.GrpcRoute_Filter_FailureInjector:
			fi := k.FailureInjector
			if fi.GetRatio() != nil && fi.GetRatio().GetDenominator() == 0 {
				return rule, errors.New("failure injector ratio with a zero denominator")
			}
			rt.Fail = &Fault{GRPC: true, GRPCCode: fi.GetCode(), Message: fi.GetMessage(), Numerator: fi.GetRatio().GetNumerator(), Denominator: fi.GetRatio().GetDenominator()}
		default:
			return rule, errors.New("unknown filter")
		}
	}
	var err error
	rt.Backends, rt.FirstAvailable, err = grpcBackends(prr.GetBackends(), target)
	if err != nil {
		return rule, err
	}
	//lint:ignore SA1019 request_timeout is deprecated in the proxy API in favour of timeouts, but a control plane that sends only it must still be obeyed (timeoutsOf uses it when timeouts.response is unset)
	rt.Timeouts = timeoutsOf(prr.GetTimeouts(), prr.GetRequestTimeout().AsDuration())
	if pr := prr.GetRetry(); pr != nil {
		rt.Retry = &Retry{
			MaxRetries:      pr.GetMaxRetries(),
			MaxRequestBytes: int64(pr.GetMaxRequestBytes()),
			Timeout:         pr.GetTimeout().AsDuration(),
			MinBackoff:      pr.GetBackoff().GetMinBackoff().AsDuration(),
			MaxBackoff:      pr.GetBackoff().GetMaxBackoff().AsDuration(),
			Jitter:          float64(pr.GetBackoff().GetJitterRatio()),
			GRPCCodes:       map[uint32]bool{},
			// A trailers-only answer may carry grpc-retry-pushback-ms.
			RespectRetryAfter: pr.GetBackoff().GetRespectRetryAfterHint(),
			// gRPC calls are all POSTs; a GRPCRoute retry policy is the
			// operator's statement that its methods may be repeated.
			NonIdempotent: true,
		}
		c := pr.GetConditions()
		for code, on := range map[uint32]bool{1: c.GetCancelled(), 4: c.GetDeadineExceeded(), 8: c.GetResourceExhausted(), 13: c.GetInternal(), 14: c.GetUnavailable()} {
			if on {
				rt.Retry.GRPCCodes[code] = true
			}
		}
		normalizeRetry(rt.Retry)
	}
	rule.route = rt
	return rule, nil
}

func grpcBackends(d *outbound.GrpcRoute_Distribution, target string) ([]Backend, bool, error) {
	if d == nil {
		return []Backend{{Name: target, Weight: 1, Authority: target}}, false, nil
	}
	one := func(rb *outbound.GrpcRoute_RouteBackend, w uint32) (Backend, error) {
		b, err := backendOf(rb.GetBackend(), w)
		if err != nil {
			return b, err
		}
		for _, f := range rb.GetFilters() {
			switch k := f.GetKind().(type) {
			case *outbound.GrpcRoute_Filter_RequestHeaderModifier:
				m, err := headerModifier(k.RequestHeaderModifier.GetAdd(), k.RequestHeaderModifier.GetSet(), k.RequestHeaderModifier.GetRemove())
				if err != nil {
					return b, err
				}
				b.RequestHeaders = m
			case *outbound.GrpcRoute_Filter_FailureInjector:
				fi := k.FailureInjector
				b.Fail = &Fault{GRPC: true, GRPCCode: fi.GetCode(), Message: fi.GetMessage(), Numerator: fi.GetRatio().GetNumerator(), Denominator: fi.GetRatio().GetDenominator()}
			default:
				return b, errors.New("unknown backend filter")
			}
		}
		return b, nil
	}
	switch k := d.GetKind().(type) {
	case *outbound.GrpcRoute_Distribution_Empty_:
		return nil, false, nil
	case *outbound.GrpcRoute_Distribution_FirstAvailable_:
		out, err := backendList(k.FirstAvailable.GetBackends(), func(rb *outbound.GrpcRoute_RouteBackend) (Backend, error) {
			return one(rb, 1)
		})
		return out, true, err
	case *outbound.GrpcRoute_Distribution_RandomAvailable_:
		out, err := backendList(k.RandomAvailable.GetBackends(), func(wb *outbound.GrpcRoute_WeightedRouteBackend) (Backend, error) {
			return one(wb.GetBackend(), wb.GetWeight())
		})
		return out, false, err
	}
	return nil, false, errors.New("unknown distribution")
}
