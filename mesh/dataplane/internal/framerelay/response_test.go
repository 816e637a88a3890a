package framerelay

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// brokenBody is an upstream body that gives some bytes and then fails,
// as h2client's body does when the upstream resets its stream.
type brokenBody struct{ left string }

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.left == "" {
		return 0, httpcore.ErrUpstreamBody
	}
	n := copy(p, b.left)
	b.left = b.left[n:]
	return n, nil
}

func (b *brokenBody) Close() error { return nil }

// relayThroughServer serves one request with RelayResponse of resp on a
// real HTTP/1.1 server, and returns what the client read, the
// response_total series the exchange recorded, and the client's error
// (of the request or of the body).
func relayThroughServer(t *testing.T, resp *http.Response, fix func(http.Header)) (http.Header, string, string, error) {
	t.Helper()
	st := metricstore.NewStore(prometheus.NewCounter(prometheus.CounterOpts{Name: "overflow_total", Help: "x"}))
	h := reqmetrics.New(st)
	ep := h.Series(&h.EP, (&metricstore.Labels{}).Add("direction", "inbound"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s reqmetrics.Stats
		s.Begin(nil, time.Now())
		s.Attempt(ep)
		var tr *tap.Request
		RelayResponse(w, resp, false, Exchange{Stats: &s, Tap: &tr, Fix: fix})
	}))
	defer srv.Close()
	var header http.Header
	var body []byte
	got, rerr := srv.Client().Get(srv.URL)
	if rerr == nil {
		header = got.Header
		body, rerr = io.ReadAll(got.Body)
		_ = got.Body.Close()
	}
	srv.Close() // the handler has returned: its series are recorded
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(st))
	var out strings.Builder
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "response_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				out.WriteString(l.GetName() + "=" + l.GetValue() + " ")
			}
			out.WriteString("\n")
		}
	}
	return header, string(body), out.String(), rerr
}

func TestARelayedResponseIsFixedAndRecordedByItsTrailersGRPCStatus(t *testing.T) {
	resp := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/grpc"}, "L5d-Dst-Canonical": {"web.shop.svc.cluster.local:80"}},
		Body:       io.NopCloser(strings.NewReader("payload")),
		Trailer:    http.Header{"Grpc-Status": {"14"}},
	}
	header, body, series, err := relayThroughServer(t, resp, httpcore.RemoveMeshHeaders)
	require.NoError(t, err)
	assert.Equal(t, "payload", body)
	assert.Empty(t, header.Get("L5d-Dst-Canonical"), "the fix ran on the head")
	assert.Contains(t, series, "classification=failure", "grpc-status 14 from the trailers makes it a failure")
	assert.Contains(t, series, "grpc_status=14")
}

func TestAnUpstreamBodyThatBreaksBreaksTheClientsResponseAndIsRecorded(t *testing.T) {
	// No length: ended normally, a chunked body would look whole.
	resp := &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{},
		ContentLength: -1,
		Body:          &brokenBody{left: "first"},
	}
	_, body, series, err := relayThroughServer(t, resp, httpcore.RemoveMeshHeaders)
	// The handler aborts: the connection closes with the response cut
	// short (before or after its head reached the client).
	require.Error(t, err, "the client does not see a whole response")
	assert.LessOrEqual(t, len(body), len("first"))
	assert.Contains(t, series, "error=upstream-reset")
	assert.Contains(t, series, "classification=failure")
}
