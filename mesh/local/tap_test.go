package local_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	tappb "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/local"
)

// observe opens a tap on addr with cfg and returns the first error of the
// stream (nil if it is open: the proxy counted it).
func observe(t *testing.T, ctx context.Context, addr string, cfg *tls.Config) (tappb.Tap_ObserveClient, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	s, err := tappb.NewTapClient(conn).Observe(ctx, &tappb.ObserveRequest{Limit: 10, Match: &tappb.ObserveRequest_Match{
		Match: &tappb.ObserveRequest_Match_All{All: &tappb.ObserveRequest_Match_Seq{}}}})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func tapsOpen(t *testing.T, p *local.Proxy) float64 {
	t.Helper()
	mfs, err := p.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "tap_streams_open" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

func TestRunnerServesTapOverMutualTLSOnlyToTheMeshsTapper(t *testing.T) {
	r, _, _ := startMesh(t, twoWorkloads, local.WithApp("api", echoApp))
	st := r.State()
	require.NotNil(t, st.Tap)
	var api *local.Proxy
	for _, p := range st.Proxies {
		if p.Pod.Workload == "api" {
			api = p
		}
	}
	require.NotNil(t, api)
	assert.Equal(t, "weft-tap.weft.serviceaccount.identity.weft.cluster.local", local.TapperIdentity)
	assert.Equal(t, uint16(local.TapPort), api.Pod.Tap.Port())

	// The credentials on disk are the ones in State.
	onDisk, err := local.LoadTap(st.Dir)
	require.NoError(t, err)
	assert.Equal(t, st.Tap.Certificate.Certificate, onDisk.Certificate.Certificate)

	ctx := testutil.Context(t, time.Minute)
	// The tapper, verifying the proxy's identity: the proxy counts the tap.
	_, err = observe(t, ctx, api.Pod.Tap.String(), st.Tap.TLSConfig(api.Pod))
	require.NoError(t, err)
	testutil.Eventually(t, 30*time.Second, func() bool { return tapsOpen(t, api) == 1 }, "the api proxy to count the tap")

	// No client certificate: the handshake fails, nothing is counted.
	noCert := st.Tap.TLSConfig(api.Pod)
	noCert.Certificates = nil
	s, err := observe(t, ctx, api.Pod.Tap.String(), noCert)
	if err == nil {
		_, err = s.Recv()
	}
	assert.Error(t, err, "a tapper without a certificate is refused")

	// The tapper's name, from another trust anchor: refused too.
	other := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}).Issuer(t, testutil.CertOptions{Name: "other-issuer"})
	forged := st.Tap.TLSConfig(api.Pod)
	forged.Certificates = []tls.Certificate{other.Leaf(t, testutil.CertOptions{Name: local.TapperIdentity}).TLS}
	s, err = observe(t, ctx, api.Pod.Tap.String(), forged)
	if err == nil {
		_, err = s.Recv()
	}
	assert.Error(t, err, "a certificate the mesh did not issue is refused")

	// Dialling api's tap port expecting another pod's identity fails: the
	// tapper verifies whom it taps.
	web, ok := st.Plan.Pod("shop", "web-0")
	require.True(t, ok)
	s, err = observe(t, ctx, api.Pod.Tap.String(), st.Tap.TLSConfig(web))
	if err == nil {
		_, err = s.Recv()
	}
	assert.Error(t, err, "the server is api, not web")
	assert.Equal(t, 1.0, tapsOpen(t, api), "only the tapper's tap is open")
}
