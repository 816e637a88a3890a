// Package otlpexport exports the proxy's spans to an OpenTelemetry
// collector over OTLP/gRPC, with OpenTelemetry's Go SDK. Its Tracer
// implements the seam the proxy records spans through (mesh/dataplane's
// WithTracer); only the weft-proxy binary links this package, and so the
// SDK.
//
// # Using it
//
//	cfg, err := tracing.FromEnv(os.LookupEnv) // WEFT_PROXY_TRACE_*
//	if cfg.Enabled() {
//		tr, err := otlpexport.New(ctx, cfg)
//		defer tr.Shutdown(context.Background()) // flushes what is queued
//		p, err := dataplane.New(ctx, proxyCfg, id, res, pol, dataplane.WithTracer(tr))
//	}
//
// # What it records
//
// Start joins the trace of the request: its span is a child of the
// caller's, with the caller's sampling decision (a parent-based sampler
// that never samples on its own). An unsampled span is not recorded but
// still gets an id of its own, which the proxy sends on as the parent.
// Recorded spans carry OpenTelemetry's HTTP attributes (method, path,
// query, host, port, protocol version, user agent, status, gRPC status,
// error type) and weft.direction; the resource names the proxy:
// service.name, host.name, process.pid, k8s.pod.name, k8s.namespace.name
// and the attributes of the settings.
//
// # Bounds and failure
//
// Ended spans go to the SDK's batch processor: a queue of at most
// tracing.DefaultMaxQueueSize (2048) spans, exported in batches of up to
// 512 every five seconds or when a batch fills. A full queue drops new
// spans; an export, its retries included, is bounded by 10 seconds,
// after which its batch is dropped. Nothing on
// a request's path waits for the collector: a collector that is down,
// slow or refusing costs spans, never requests. New does not dial: the
// connection is made when the first batch goes out.
//
// The SDK reports failed exports to OpenTelemetry's global error handler,
// which the program sets (weft-proxy logs them); this package sets no
// global.
package otlpexport
