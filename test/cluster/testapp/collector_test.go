package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weftmesh/weft/internal/testutil/otlptest"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// The collector mode over a real gRPC connection: what an exporter sends
// is what /spans answers, filtered by trace id.
func TestCollectorServesTheSpansItReceived(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	col := otlptest.Serve(ln)
	defer col.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()

	traceA := []byte{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	traceB := []byte{0xb1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = collectortrace.NewTraceServiceClient(cc).Export(ctx, &collectortrace.ExportTraceServiceRequest{
		ResourceSpans: []*tracepb.ResourceSpans{{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("k8s.pod.name", "client-1")}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
				{TraceId: traceA, SpanId: []byte{1, 1, 1, 1, 1, 1, 1, 1}, ParentSpanId: []byte{2, 2, 2, 2, 2, 2, 2, 2}, Name: "GET /", Kind: tracepb.Span_SPAN_KIND_CLIENT,
					Attributes: []*commonpb.KeyValue{str("weft.direction", "outbound"), {Key: "http.response.status_code", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 200}}}}},
				{TraceId: traceB, SpanId: []byte{3, 3, 3, 3, 3, 3, 3, 3}, Name: "GET /b", Kind: tracepb.Span_SPAN_KIND_SERVER},
			}}},
		}},
	})
	require.NoError(t, err)

	get := func(q string) (int, []SpanJSON) {
		rec := httptest.NewRecorder()
		spansHandler(col).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/spans?"+q, nil))
		var out []SpanJSON
		if rec.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		}
		return rec.Code, out
	}
	code, all := get("")
	require.Equal(t, http.StatusOK, code)
	assert.Len(t, all, 2)
	code, a := get(url.Values{"trace": {"a102030405060708090a0b0c0d0e0f10"}}.Encode())
	require.Equal(t, http.StatusOK, code)
	require.Len(t, a, 1)
	assert.Equal(t, SpanJSON{
		TraceID: "a102030405060708090a0b0c0d0e0f10", SpanID: "0101010101010101", ParentID: "0202020202020202",
		Name: "GET /", Kind: "SPAN_KIND_CLIENT",
		Attributes: map[string]string{"weft.direction": "outbound", "http.response.status_code": "200"},
		Resource:   map[string]string{"k8s.pod.name": "client-1"},
	}, a[0])
	code, none := get(url.Values{"trace": {"c1020304050607080900000000000000"}}.Encode())
	require.Equal(t, http.StatusOK, code)
	assert.Empty(t, none, "no span of an unknown trace, and [] rather than null")

	for _, bad := range []string{"A1020304050607080900000000000000", "a10203", "zz020304050607080900000000000000"} {
		code, _ := get(url.Values{"trace": {bad}}.Encode())
		assert.Equal(t, http.StatusBadRequest, code, bad)
	}
}

// /call's header and show parameters: sent and reported, and bad ones
// refused with the parameter named.
func TestCallSendsHeadersAndShowsResponseHeaders(t *testing.T) {
	backend := &app{name: "backend"}
	srv := httptest.NewServer(http.HandlerFunc(backend.serve))
	defer srv.Close()
	a := &app{name: "client", client: &http.Client{Timeout: callTimeout}}
	q := url.Values{"url": {srv.URL + "/"}, "n": {"2"}, "marker": {"m"},
		"header": {"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"show":   {"X-Received-Traceparent", "X-Absent"}}
	rec := httptest.NewRecorder()
	a.call(rec, httptest.NewRequest(http.MethodGet, "/call?"+q.Encode(), nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var c Counts
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &c))
	assert.Equal(t, 2, c.OK)
	assert.Equal(t, "backend m", c.Last)
	assert.Equal(t, map[string]string{"X-Received-Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, c.Headers,
		"the backend saw the header and said so; an absent header is not reported")

	for _, tc := range []struct {
		param, value, want string
	}{
		{"header", "no colon", `header "no colon"`},
		{"header", "bad name: v", `header "bad name: v"`},
		{"header", "X-Ok: a\rb", "want Name: Value on one line"},
		{"show", "X Y", `show "X Y"`},
		{"show", "", `show ""`},
	} {
		q := url.Values{"url": {srv.URL + "/"}, tc.param: {tc.value}}
		_, err := parseCall(q)
		assert.ErrorContains(t, err, tc.want, "%s=%q", tc.param, tc.value)
	}
	many := url.Values{"url": {srv.URL + "/"}}
	for i := 0; i <= maxCallHeaders; i++ {
		many.Add("header", "X-A: b")
	}
	_, err := parseCall(many)
	assert.ErrorContains(t, err, "at most 10")
}
