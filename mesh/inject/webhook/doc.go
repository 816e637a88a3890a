// Package webhook serves Weft's admission webhooks as http.Handlers: the
// mutating [Injector], which adds the proxy to pods through inject.Render,
// and the validating [Validator] for ServiceProfiles, policy.linkerd.io
// resources and the Gateway API routes Weft reads.
//
// The handlers never open listeners: `weft-controller injector` serves them
// over TLS (the API server only calls webhooks over HTTPS), for example
//
//	injector, err := webhook.NewInjector(values, namespaces, webhook.WithLogger(logger))
//	validator, err := webhook.NewValidator(webhook.WithLogger(logger))
//	mux := http.NewServeMux()
//	mux.Handle("/inject", injector)
//	mux.Handle("/validate", validator)
//	srv := &http.Server{Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 5 * time.Second}
//
// # Requests and answers
//
// Both handlers accept only AdmissionReview admission.k8s.io/v1 sent with
// POST and Content-Type application/json. They answer with plain HTTP
// errors when the request itself is wrong: 405 (method), 415 (content
// type), 413 (body over the limit: [MaxBodyBytes], 4 MiB, for the
// injector, [MaxValidateBodyBytes], 1 MiB, for the validator;
// WithMaxBodyBytes changes it) and 400 (malformed JSON, another
// apiVersion or kind, a missing request or an empty request.uid). An HTTP
// error makes the API server apply the webhook's failurePolicy.
//
// # Limits
//
// A [Limiter] caps the reviews in flight (DefaultMaxInFlight, 8, unless
// WithLimiter shares another one): beyond it a review is answered 429 Too
// Many Requests with "Retry-After: 1" at once, before its body is read
// (over HTTP/1 the connection is then closed, so that Go's server does not
// wait for the unread body). The API server retries within the webhook's
// timeout, then applies the failurePolicy. A body over the limit is
// refused from its Content-Length without reading it, or after the limit
// when it is chunked.
//
// A review is read into one buffer of its exact size, and its object is
// decoded while the review is parsed, keeping no copy of the object's
// JSON; once parsed only the decoded object remains. A pod review holds
// about 1.2 times its size while it waits on the namespace lookup and
// about 3 times at its peak (docs/benchmarks.md).
//
// The injector answers 500 when it cannot read the pod's namespace, so the
// failurePolicy decides (Ignore: the pod starts without a proxy; Fail: it
// is refused until the injector recovers). Otherwise it answers with an
// AdmissionReview: other kinds, operations other than CREATE and
// subresources are allowed unchanged; a pod is allowed with the JSON Patch
// from inject.Render (empty when the pod is not injected, with "injected"
// and "reason" audit annotations), or denied with code 422 when an
// annotation is invalid, the message naming the annotation and value.
// Warnings from rendering are returned as admission warnings, which kubectl
// prints.
//
// The validator decodes the object strictly (apis/manifest): an unknown
// field, a value of the wrong type or one its CRD schema forbids is a
// rejection naming the field. It then runs [Validate], which judges what a
// schema cannot with the controllers' own translation:
// discovery.TranslateServiceProfile for ServiceProfiles and policy.Validate
// for the policy kinds and routes. So the webhook refuses exactly what the
// destination and policy controllers would ignore, with their messages,
// and accepts what they use (a network written with host bits set, such as
// 10.0.0.1/8, means 10.0.0.0/8 to both). Rejections (code 422) list every
// invalid field in the message and as status causes. Deletions and kinds it
// does not know are allowed.
//
// A panic below a handler is turned into a 500 and logged; the process
// keeps serving.
//
// # Metrics
//
// [WithMetrics] takes a [Metrics] of go-kit instruments, a request counter
// and a latency histogram (seconds), both labelled "outcome": injected,
// skipped, allowed, denied, bad_request, too_large, overloaded or error.
// Nil fields, and the default [DiscardMetrics], record nothing.
// [NewPrometheusMetrics] registers them as weft_injector_requests_total
// and weft_injector_request_duration_seconds. [Limiter.InFlight] and [Limiter.Refused] can back
// a gauge and a counter.
package webhook
