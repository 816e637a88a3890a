package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/vocab"
)

// Failure accrual and load biasing of a Service, read from the annotations
// Linkerd's policy controller reads, with its defaults and bounds.
const (
	defaultAccrualMaxFailures  uint32  = 7
	defaultAccrualMinPenalty           = time.Second
	defaultAccrualMaxPenalty           = time.Minute
	defaultAccrualJitter       float32 = 0.5
	defaultSuccessRate                 = 0.8
	defaultSuccessRateWindow           = 10 * time.Second
	defaultSuccessRateRequests uint32  = 5
	minSuccessRateWindow               = 10 * time.Millisecond
	maxSuccessRateRequests     uint32  = 1_000_000

	defaultBiasPenalty       = 5 * time.Second
	defaultBiasPenaltyDecay  = 10 * time.Second
	defaultBiasMaxRetryAfter = 5 * time.Minute
)

// accrualSpec is the failure accrual of a Service.
type accrualSpec struct {
	unified                bool
	maxFailures            uint32
	minPenalty, maxPenalty time.Duration
	jitter                 float32
	// Unified only.
	successRate     float64
	window          time.Duration
	minRequests     uint32
	honorRetryAfter bool
}

// biasSpec is the penalised peak-EWMA estimator of a Service.
type biasSpec struct {
	penalty, maxRetryAfter time.Duration
}

func annotationField(k string) string { return "metadata.annotations." + k }

// parseAccrual reads balancer.linkerd.io/failure-accrual ("consecutive" or
// "unified") and its parameters. A value that does not parse turns
// failure accrual off, with a warning (Linkerd logs and does the same).
func parseAccrual(p *problems, ref ObjectRef, a map[string]string) *accrualSpec {
	successKeys := false
	for k := range a {
		if strings.HasPrefix(k, vocab.AnnotationAccrualSuccessRatePrefix) {
			successKeys = true
		}
	}
	mode, ok := a[vocab.AnnotationFailureAccrual]
	honor, herr := parseBoolAnnotation(a, vocab.AnnotationAccrualHonorRetryAfter)
	if herr != nil {
		p.warnf(ref, annotationField(vocab.AnnotationAccrualHonorRetryAfter), "%v; Retry-After is not honoured", herr)
	}
	if !ok {
		if successKeys {
			p.warnf(ref, annotationField(vocab.AnnotationFailureAccrual), "success-rate annotations have no effect without failure accrual; set it to unified")
		}
		if honor {
			p.warnf(ref, annotationField(vocab.AnnotationAccrualHonorRetryAfter), "has no effect without failure accrual")
		}
		return nil
	}
	s := &accrualSpec{}
	switch mode {
	case "consecutive":
		if successKeys {
			p.warnf(ref, annotationField(vocab.AnnotationFailureAccrual), "success-rate annotations have no effect in consecutive mode; use unified")
		}
		if honor {
			p.warnf(ref, annotationField(vocab.AnnotationAccrualHonorRetryAfter), "has effect in unified mode only")
		}
	case "unified":
		s.unified, s.honorRetryAfter = true, honor
	default:
		p.warnf(ref, annotationField(vocab.AnnotationFailureAccrual), "unsupported failure accrual mode %q (want consecutive or unified); failure accrual is off", mode)
		return nil
	}
	field, err := s.parseConsecutive(a)
	if err == nil && s.unified {
		field, err = s.parseSuccessRate(a)
	}
	if err != nil {
		p.warnf(ref, annotationField(field), "%v; failure accrual is off", err)
		return nil
	}
	return s
}

// parseConsecutive reads the consecutive-* parameters, which both modes
// use; it returns the offending key with an error.
func (s *accrualSpec) parseConsecutive(a map[string]string) (string, error) {
	s.maxFailures, s.minPenalty, s.maxPenalty, s.jitter = defaultAccrualMaxFailures, defaultAccrualMinPenalty, defaultAccrualMaxPenalty, defaultAccrualJitter
	if v, ok := a[vocab.AnnotationAccrualMaxFailures]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return vocab.AnnotationAccrualMaxFailures, fmt.Errorf("%q is not a number of failures", v)
		}
		s.maxFailures = uint32(n)
	}
	for _, kv := range []struct {
		key string
		dst *time.Duration
	}{{vocab.AnnotationAccrualMinPenalty, &s.minPenalty}, {vocab.AnnotationAccrualMaxPenalty, &s.maxPenalty}} {
		if v, ok := a[kv.key]; ok {
			d, err := parseLinkerdDuration(v)
			if err != nil {
				return kv.key, err
			}
			*kv.dst = d
		}
	}
	if v, ok := a[vocab.AnnotationAccrualJitterRatio]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return vocab.AnnotationAccrualJitterRatio, fmt.Errorf("%q is not a ratio between 0 and 100", v)
		}
		s.jitter = float32(f)
	}
	if s.maxPenalty == 0 {
		return vocab.AnnotationAccrualMaxPenalty, fmt.Errorf("the max penalty is zero")
	}
	if s.minPenalty > s.maxPenalty {
		return vocab.AnnotationAccrualMinPenalty, fmt.Errorf("min penalty %s exceeds max penalty %s", s.minPenalty, s.maxPenalty)
	}
	return "", nil
}

// parseSuccessRate reads the success-rate parameters of the unified mode.
func (s *accrualSpec) parseSuccessRate(a map[string]string) (string, error) {
	s.successRate, s.window, s.minRequests = defaultSuccessRate, defaultSuccessRateWindow, defaultSuccessRateRequests
	if v, ok := a[vocab.AnnotationAccrualSuccessRateThreshold]; ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return vocab.AnnotationAccrualSuccessRateThreshold, fmt.Errorf("%q is not a success rate between 0 and 1", v)
		}
		s.successRate = f
	}
	if v, ok := a[vocab.AnnotationAccrualSuccessRateWindow]; ok {
		d, err := parseLinkerdDuration(v)
		if err != nil {
			return vocab.AnnotationAccrualSuccessRateWindow, err
		}
		s.window = d
	}
	if s.window <= 0 {
		return vocab.AnnotationAccrualSuccessRateWindow, fmt.Errorf("the success-rate window must be longer than zero")
	}
	if v, ok := a[vocab.AnnotationAccrualSuccessRateMinRequests]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return vocab.AnnotationAccrualSuccessRateMinRequests, fmt.Errorf("%q is not a number of requests", v)
		}
		s.minRequests = uint32(n)
	}
	// The proxy refuses these only when the success rate is in use.
	if s.successRate != 0 {
		if s.window < minSuccessRateWindow {
			return vocab.AnnotationAccrualSuccessRateWindow, fmt.Errorf("the success-rate window must be at least %s, got %s", minSuccessRateWindow, s.window)
		}
		if s.minRequests > maxSuccessRateRequests {
			return vocab.AnnotationAccrualSuccessRateMinRequests, fmt.Errorf("at most %d requests, got %d", maxSuccessRateRequests, s.minRequests)
		}
	}
	return "", nil
}

// parseLoadBias reads balancer.alpha.linkerd.io/penalize-failures and its
// parameters; nil means plain peak EWMA.
func parseLoadBias(p *problems, ref ObjectRef, a map[string]string) *biasSpec {
	on, err := parseBoolAnnotation(a, vocab.AnnotationPenalizeFailures)
	if err != nil {
		p.warnf(ref, annotationField(vocab.AnnotationPenalizeFailures), "%v; failures are not penalised", err)
		return nil
	}
	if !on {
		return nil
	}
	s := &biasSpec{penalty: defaultBiasPenalty, maxRetryAfter: defaultBiasMaxRetryAfter}
	for _, kv := range []struct {
		key string
		dst *time.Duration
	}{{vocab.AnnotationLoadBiaserPenalty, &s.penalty}, {vocab.AnnotationLoadBiaserMaxRetryAfter, &s.maxRetryAfter}} {
		if v, ok := a[kv.key]; ok {
			d, err := parseLinkerdDuration(v)
			if err != nil {
				p.warnf(ref, annotationField(kv.key), "%v; failures are not penalised", err)
				return nil
			}
			*kv.dst = d
		}
	}
	// The proxy keeps the penalty as 32-bit milliseconds.
	if s.penalty > time.Duration(math.MaxUint32)*time.Millisecond {
		p.warnf(ref, annotationField(vocab.AnnotationLoadBiaserPenalty), "the penalty is longer than %s; failures are not penalised", time.Duration(math.MaxUint32)*time.Millisecond)
		return nil
	}
	return s
}

// parseBoolAnnotation reads an on/off annotation with strconv.ParseBool's
// words; absent is off.
func parseBoolAnnotation(a map[string]string, key string) (bool, error) {
	v, ok := a[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%q is not true or false", v)
	}
	return b, nil
}

// proto renders failure accrual for the Outbound API.
func (s *accrualSpec) proto() *outbound.FailureAccrual {
	if s == nil {
		return nil
	}
	backoff := &outbound.ExponentialBackoff{MinBackoff: dur(s.minPenalty), MaxBackoff: dur(s.maxPenalty), JitterRatio: s.jitter}
	if !s.unified {
		// The consecutive breaker does not act on Retry-After.
		return &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_ConsecutiveFailures_{ConsecutiveFailures: &outbound.FailureAccrual_ConsecutiveFailures{
			MaxFailures: s.maxFailures, Backoff: backoff,
		}}}
	}
	backoff.RespectRetryAfterHint = s.honorRetryAfter
	return &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_Unified_{Unified: &outbound.FailureAccrual_Unified{
		SuccessRateThreshold:   s.successRate,
		Decay:                  dur(s.window),
		MinRequests:            s.minRequests,
		MaxConsecutiveFailures: s.maxFailures,
		Backoff:                backoff,
	}}}
}

// balancerLoad is the load estimator of a Service's balancers: penalised
// peak EWMA when the Service asks for it and its traffic is HTTP (an
// opaque port has no response to penalise), else peak EWMA.
func balancerLoad(bias *biasSpec, opaque bool) func(*outbound.Backend_BalanceP2C) {
	return func(b *outbound.Backend_BalanceP2C) {
		if bias == nil || opaque {
			b.Load = &outbound.Backend_BalanceP2C_PeakEwma_{PeakEwma: &outbound.Backend_BalanceP2C_PeakEwma{DefaultRtt: dur(ewmaDefaultRTT), Decay: dur(ewmaDecay)}}
			return
		}
		b.Load = &outbound.Backend_BalanceP2C_PenaltyPeakEwma_{PenaltyPeakEwma: &outbound.Backend_BalanceP2C_PenaltyPeakEwma{
			DefaultRtt: dur(ewmaDefaultRTT), Decay: dur(ewmaDecay),
			Penalty: dur(bias.penalty), MaxRetryAfter: dur(bias.maxRetryAfter), PenaltyDecay: dur(defaultBiasPenaltyDecay),
		}}
	}
}
