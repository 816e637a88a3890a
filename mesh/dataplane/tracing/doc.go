// Package tracing holds the proxy's tracing settings: where its spans go
// (an OTLP/gRPC collector) and how it names itself in them. FromEnv reads
// them from the WEFT_PROXY_TRACE_* variables the injector renders from
// Linkerd's config.linkerd.io/trace-collector annotations; every bad value
// is refused naming its variable.
//
// The package links nothing of OpenTelemetry. The exporter is its
// subpackage otlpexport, built on OpenTelemetry's Go SDK, which only the
// weft-proxy binary links (a rule of internal/depstest); weft-init and the
// other programs that share the proxy's command package stay without it.
package tracing
