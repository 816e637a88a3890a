// Package proxytrace starts weft-proxy's tracer: the OTLP exporter of
// mesh/dataplane/tracing/otlpexport, with the process's OpenTelemetry
// error handler pointed at the proxy's log. It is a package of its own so
// that only cmd/weft-proxy links the OpenTelemetry SDK (weft-init shares
// the proxy's command package, internal/cli/proxycmd).
package proxytrace

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
	"github.com/weftmesh/weft/mesh/dataplane/tracing/otlpexport"
)

// Start builds the tracer for cfg (a proxycmd.TracingStarter): over mesh
// TLS with id's certificate when cfg names the collector's identity, in
// plaintext otherwise. ctx bounds the start only. The returned function
// flushes what is queued, for at most five seconds, and stops the
// exporter.
func Start(ctx context.Context, cfg tracing.Config, id dataplane.Identity, log *slog.Logger) (dataplane.Option, func(), error) {
	// The SDK reports failed exports through OpenTelemetry's global error
	// handler; the binary owns the process's globals, so it is set here.
	// The batch processor exports at most every few seconds, which bounds
	// these lines.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("trace export failed; the spans of that batch are dropped", "collector", cfg.CollectorAddr, "err", err)
	}))
	var opts []otlpexport.Option
	if cfg.CollectorIdentity != "" {
		opts = append(opts, otlpexport.WithMeshTLS(id, cfg.CollectorIdentity))
	}
	tr, err := otlpexport.New(ctx, cfg, opts...)
	if err != nil {
		return nil, nil, err
	}
	if cfg.CollectorIdentity != "" {
		log.Info("tracing on: the spans of sampled requests go to the collector over mesh TLS",
			"collector", cfg.CollectorAddr, "collector_identity", cfg.CollectorIdentity, "service_name", cfg.ServiceName)
	} else {
		log.Info("tracing on: the spans of sampled requests go to the collector in plaintext (no collector identity is set)",
			"collector", cfg.CollectorAddr, "service_name", cfg.ServiceName)
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("spans still queued at shutdown were not all exported", "err", err)
		}
	}
	return dataplane.WithTracer(tr), stop, nil
}
