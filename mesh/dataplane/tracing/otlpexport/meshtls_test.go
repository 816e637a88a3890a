package otlpexport_test

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/otlptest"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
	"github.com/weftmesh/weft/mesh/dataplane/tracing/otlpexport"
)

const (
	proxyID     = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	collectorID = "otel-collector.tracing.serviceaccount.identity.linkerd.cluster.local"
)

// meshCollector is a collector behind mesh TLS with identity name, as a
// meshed collector is behind its proxy; it asks every client for a
// certificate of the same mesh.
func meshCollector(t *testing.T, ca *testutil.CA, anchor *testutil.CA, name string) *otlptest.Collector {
	leaf := ca.Leaf(t, testutil.CertOptions{Name: name})
	return otlptest.StartTLS(t, &tls.Config{
		Certificates: []tls.Certificate{leaf.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    testutil.Pool(anchor),
		MinVersion:   tls.VersionTLS13,
	})
}

func TestMeshTLSExportPresentsTheProxysIdentityToTheCollector(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	id, err := dataplane.NewStaticIdentity(proxyID, issuer.Leaf(t, testutil.CertOptions{Name: proxyID}).TLS, testutil.Pool(anchor))
	require.NoError(t, err)
	col := meshCollector(t, issuer, anchor, collectorID)

	tr := newTracer(t, tracing.Config{CollectorAddr: col.Addr()}, otlpexport.WithMeshTLS(id, collectorID))
	parent := parentOf(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	tr.Start(parent, trace.Client, httptest.NewRequest("GET", "http://web:80/", nil)).End(200, "", "")
	ctx := testutil.Context(t, 0)
	require.NoError(t, tr.ForceFlush(ctx))
	spans, err := col.WaitSpans(ctx, 1)
	require.NoError(t, err)
	assert.Len(t, spans, 1)
	assert.Equal(t, []string{proxyID}, col.Peers(), "the collector's side sees the proxy's identity")
}

func TestMeshTLSExportRefusesACollectorWithAnotherIdentity(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	id, err := dataplane.NewStaticIdentity(proxyID, issuer.Leaf(t, testutil.CertOptions{Name: proxyID}).TLS, testutil.Pool(anchor))
	require.NoError(t, err)
	impostor := meshCollector(t, issuer, anchor, "impostor.tracing.serviceaccount.identity.linkerd.cluster.local")

	tr := newTracer(t, tracing.Config{CollectorAddr: impostor.Addr()}, otlpexport.WithMeshTLS(id, collectorID),
		otlpexport.WithRetryFor(0), otlpexport.WithExportTimeout(2*time.Second),
		otlpexport.WithBatchTimeout(time.Hour)) // only the flush below exports, so its result is the export's
	parent := parentOf(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	tr.Start(parent, trace.Client, httptest.NewRequest("GET", "http://web:80/", nil)).End(200, "", "")
	// The flush tries the export once and fails it: the client refuses the
	// collector's certificate, so nothing is sent.
	assert.Error(t, tr.ForceFlush(testutil.Context(t, 0)))
	assert.Zero(t, impostor.Exports())
	assert.Empty(t, impostor.Peers(), "no handshake completed")
}

func TestMeshTLSNeedsAValidCollectorIdentity(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	id, err := dataplane.NewStaticIdentity(proxyID, anchor.Leaf(t, testutil.CertOptions{Name: proxyID}).TLS, testutil.Pool(anchor))
	require.NoError(t, err)
	_, err = otlpexport.New(testutil.Context(t, 0), tracing.Config{CollectorAddr: "collector:4317"}, otlpexport.WithMeshTLS(id, "not an identity"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "collector identity")
}
