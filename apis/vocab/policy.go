package vocab

// Annotations of authorization and outbound policy, as Linkerd names them.
const (
	// AnnotationRequireIdentityInboundPorts lists ports (numbers, ranges or
	// container port names) that get the authenticated form of an allow
	// default policy.
	AnnotationRequireIdentityInboundPorts = ConfigPrefix + "proxy-require-identity-inbound-ports"

	// Retries and timeouts of outbound routes: set on a Service (every
	// route of it) or on an HTTPRoute or GRPCRoute (overriding the
	// Service's).
	AnnotationRetryHTTP      = "retry.linkerd.io/http"
	AnnotationRetryGRPC      = "retry.linkerd.io/grpc"
	AnnotationRetryLimit     = "retry.linkerd.io/limit"
	AnnotationRetryTimeout   = "retry.linkerd.io/timeout"
	AnnotationTimeoutRequest = "timeout.linkerd.io/request"
	AnnotationTimeoutResp    = "timeout.linkerd.io/response"
	AnnotationTimeoutIdle    = "timeout.linkerd.io/idle"

	// AnnotationFailureAccrual turns failure accrual (circuit breaking) on
	// for a Service: "consecutive" or "unified". The consecutive-* keys
	// tune both modes; the success-rate keys tune the unified mode only.
	AnnotationFailureAccrual     = "balancer.linkerd.io/failure-accrual"
	AnnotationAccrualMaxFailures = "balancer.linkerd.io/failure-accrual-consecutive-max-failures"
	AnnotationAccrualMinPenalty  = "balancer.linkerd.io/failure-accrual-consecutive-min-penalty"
	AnnotationAccrualMaxPenalty  = "balancer.linkerd.io/failure-accrual-consecutive-max-penalty"
	AnnotationAccrualJitterRatio = "balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio"

	// AnnotationAccrualSuccessRatePrefix starts the success-rate keys of
	// the unified mode: -threshold, -window and -min-requests.
	AnnotationAccrualSuccessRatePrefix      = "balancer.alpha.linkerd.io/failure-accrual-success-rate"
	AnnotationAccrualSuccessRateThreshold   = AnnotationAccrualSuccessRatePrefix + "-threshold"
	AnnotationAccrualSuccessRateWindow      = AnnotationAccrualSuccessRatePrefix + "-window"
	AnnotationAccrualSuccessRateMinRequests = AnnotationAccrualSuccessRatePrefix + "-min-requests"
	// AnnotationAccrualHonorRetryAfter ("true"/"false") lets a unified
	// breaker take a response's Retry-After as its ejection time.
	AnnotationAccrualHonorRetryAfter = "balancer.alpha.linkerd.io/failure-accrual-honor-retry-after"

	// AnnotationPenalizeFailures ("true"/"false") switches the Service's
	// balancer to the penalised peak-EWMA estimator, which counts a failed
	// or rate-limited response as a slow one; the two keys below tune it.
	AnnotationPenalizeFailures        = "balancer.alpha.linkerd.io/penalize-failures"
	AnnotationLoadBiaserPenalty       = "balancer.alpha.linkerd.io/load-biaser-penalty"
	AnnotationLoadBiaserMaxRetryAfter = "balancer.alpha.linkerd.io/load-biaser-max-retry-after"
)
