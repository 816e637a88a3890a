package h2server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/weftmesh/weft/internal/testutil/grpcoracle"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
)

// startRecordingGRPC serves grpcoracle's recording test service over
// h2c.
func startRecordingGRPC(t testing.TB) (string, *grpcoracle.Seen) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln.Addr().String(), grpcoracle.Serve(t, ln)
}

// dialApp opens the relay's h2c connection to the application.
func dialApp(t testing.TB, addr string) *h2client.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := h2client.New(ctx, nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// isReady reports whether a body's Read would not block.
func isReady(r io.Reader) bool {
	rr, ok := r.(interface{ ReadReady() bool })
	return ok && rr.ReadReady()
}

// httpRelay forwards a request to the application through the
// http.Request path, as the inbound proxy does today: the request as
// h2server built it, the response copied by the proxy's own
// httpcore.CopyResponse.
func httpRelay(cc *h2client.Conn, app string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out := (&http.Request{Method: r.Method, URL: &url.URL{Scheme: "http", Host: app, Path: r.URL.Path, RawQuery: r.URL.RawQuery},
			Host: r.Host, Header: r.Header, Body: r.Body, Trailer: r.Trailer, ContentLength: r.ContentLength}).WithContext(r.Context())
		resp, err := cc.RoundTrip(out)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer resp.Body.Close()
		if _, _, err := httpcore.CopyResponse(w, resp, func(http.Header) {}, nil); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// lowerNames caches the lower-case form of h2client's canonical
// response header names, as the ResponseWriter's path does per
// connection (conn.lowerName).
var lowerNames sync.Map

// toFields appends a response header or trailer to out as header fields.
func toFields(out []hpack.HeaderField, h http.Header) []hpack.HeaderField {
	for k, vs := range h {
		name, ok := lowerNames.Load(k)
		if !ok {
			name, _ = lowerNames.LoadOrStore(k, strings.ToLower(k))
		}
		for _, v := range vs {
			out = append(out, hpack.HeaderField{Name: name.(string), Value: v})
		}
	}
	return out
}

// acceptGRPC takes gRPC requests.
func acceptGRPC(fields []hpack.HeaderField) bool {
	for _, f := range fields {
		if f.Name == "content-type" {
			return f.Value == "application/grpc" || strings.HasPrefix(f.Value, "application/grpc+")
		}
	}
	return false
}

// frameRelay forwards a request to the application through the Stream
// API. Its upstream leg is still h2client's http.Request round trip
// (the client side's frame API is the next step), so that the two relays
// differ only in how the server hands the request over and takes the
// response back. A response that ends with its header (gRPC's
// trailers-only answer) goes out as one HEADERS with END_STREAM.
func frameRelay(cc *h2client.Conn, app string) *StreamHandler {
	serve := func(st *Stream) {
		// h2client sends a header's names in lower case and looks the
		// special ones up without regard to case: the fields' names
		// need no canonical form.
		h := make(http.Header, len(st.Fields()))
		for _, f := range st.Fields() {
			h[f.Name] = append(h[f.Name], f.Value)
		}
		u, err := url.ParseRequestURI(st.Path())
		if err != nil {
			st.Reset(http2.ErrCodeInternal)
			return
		}
		u.Scheme, u.Host = "http", app
		out := (&http.Request{Method: st.Method(), URL: u, Host: st.Authority(), Header: h, Body: st.Body(), ContentLength: -1}).WithContext(st.Context())
		resp, err := cc.RoundTrip(out)
		if err != nil {
			st.Reset(http2.ErrCodeInternal)
			return
		}
		defer resp.Body.Close()
		var fields [16]hpack.HeaderField
		// As CopyResponse: the header waits for the first read, so that
		// a response ending with it is one HEADERS with END_STREAM.
		bufp, put := httpcore.BodyBuf(resp.ContentLength)
		defer put(bufp)
		buf := *bufp
		n, err := resp.Body.Read(buf)
		if n == 0 && err == io.EOF && len(resp.Trailer) == 0 {
			_ = st.WriteHeader(resp.StatusCode, toFields(fields[:0], resp.Header), true)
			return
		}
		if st.WriteHeader(resp.StatusCode, toFields(fields[:0], resp.Header), false) != nil {
			return
		}
		for {
			if n > 0 {
				if st.Write(buf[:n]) != nil {
					return
				}
			}
			if err == io.EOF {
				_ = st.End(toFields(fields[:0], resp.Trailer))
				return
			}
			if err != nil {
				st.Reset(http2.ErrCodeCancel)
				return
			}
			if !isReady(resp.Body) && st.Flush() != nil { // as CopyResponse
				return
			}
			n, err = resp.Body.Read(buf)
		}
	}
	return &StreamHandler{Accept: acceptGRPC, Serve: serve}
}

// fieldRelay forwards a request through the Stream API on this side and
// h2client's RoundTripFields on the application's: header fields go
// through as they were decoded, without a header map either way.
func fieldRelay(cc *h2client.Conn) *StreamHandler {
	serve := func(st *Stream) {
		resp, err := cc.RoundTripFields(st.Context(), &h2client.FieldRequest{Method: st.Method(), Scheme: "http",
			Authority: st.Authority(), Path: st.Path(), Fields: st.Fields(), Body: st.Body()})
		if err != nil {
			st.Reset(http2.ErrCodeInternal)
			return
		}
		defer resp.Body.Close()
		// As CopyResponse: the header waits for the first read, so that
		// a response ending with it is one HEADERS with END_STREAM.
		bufp, put := httpcore.BodyBuf(-1)
		defer put(bufp)
		buf := *bufp
		n, err := resp.Body.Read(buf)
		if n == 0 && err == io.EOF && len(resp.Trailers()) == 0 {
			_ = st.WriteHeader(resp.Status, resp.Fields, true)
			return
		}
		if st.WriteHeader(resp.Status, resp.Fields, false) != nil {
			return
		}
		for {
			if n > 0 && st.Write(buf[:n]) != nil {
				return
			}
			if err == io.EOF {
				_ = st.End(resp.Trailers())
				return
			}
			if err != nil {
				st.Reset(http2.ErrCodeCancel)
				return
			}
			if !isReady(resp.Body) && st.Flush() != nil { // as CopyResponse
				return
			}
			n, err = resp.Body.Read(buf)
		}
	}
	return &StreamHandler{Accept: acceptGRPC, Serve: serve}
}

// grpcCalls makes grpcoracle's calls through the relay at addr.
func grpcCalls(t *testing.T, addr string) map[string]grpcoracle.Result {
	return grpcoracle.Calls(t, addr, nil, grpc.WithAuthority("app.test:8080"))
}

// TestStreamsRelayGRPCAsTheHTTPHandlerPathDoes is the differential
// oracle of the frame-level APIs: the same gRPC calls, from grpc-go's
// client to grpc-go's server, relayed by a server whose requests go
// through http.Request and ResponseWriter (and h2client's RoundTrip), by
// one whose gRPC requests go through the Stream API (and RoundTrip), and
// by one with the Stream API and h2client's RoundTripFields, must
// deliver the same metadata to the application and the same header,
// messages, trailers and status back.
func TestStreamsRelayGRPCAsTheHTTPHandlerPathDoes(t *testing.T) {
	app, seen := startRecordingGRPC(t)
	viaHTTP := startServer(t, httpRelay(dialApp(t, app), app), nil)
	refused := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not a frame-level request", http.StatusTeapot)
	})
	viaFrames := startServer(t, refused, func(c *Config) { c.Streams = frameRelay(dialApp(t, app), app) })

	viaFields := startServer(t, refused, func(c *Config) { c.Streams = fieldRelay(dialApp(t, app)) })

	want := grpcCalls(t, viaHTTP.addr)
	seenHTTP := seen.Take()
	got := grpcCalls(t, viaFrames.addr)
	seenFrames := seen.Take()
	gotFields := grpcCalls(t, viaFields.addr)

	// The calls did what they are for (the oracle is not two empty maps).
	require.Len(t, want, 6)
	assert.Equal(t, codes.OK, want["unary"].Code)
	assert.Equal(t, []string{"first"}, want["unary"].Header.Get("x-grpc-test-echo-initial"))
	assert.Equal(t, []string{"\x00\x01\xff"}, want["unary"].Trailer.Get("x-grpc-test-echo-trailing-bin"))
	assert.Equal(t, codes.FailedPrecondition, want["error"].Code)
	assert.Equal(t, "nope", want["error"].Message)
	assert.Equal(t, codes.Unimplemented, want["unknown"].Code)
	assert.Greater(t, len(want["large"].Responses[0]), 3<<19)
	assert.Len(t, want["server-stream"].Responses, 3)
	assert.Len(t, want["bidi"].Responses, 3)
	assert.Equal(t, []string{"a", "b"}, seenHTTP["unary"].Get("x-extra"))

	// The one difference: the ResponseWriter declares the length of a
	// body it holds whole when the handler returns (finishLocked, as
	// net/http's servers do), in the header or, for a trailers-only
	// answer, in its one block; the Stream API sends the application's
	// fields as they are (grpc-go sends no content-length).
	for name, w := range want {
		assert.Empty(t, got[name].Header.Get("content-length"), name)
		assert.Empty(t, got[name].Trailer.Get("content-length"), name)
		w.Header, w.Trailer = withoutLength(w.Header), withoutLength(w.Trailer)
		assert.Equal(t, w, got[name], "call %s: the caller's view (Stream API)", name)
		assert.Equal(t, w, gotFields[name], "call %s: the caller's view (Stream API and RoundTripFields)", name)
	}
	assert.Equal(t, seenHTTP, seenFrames, "the application's view (Stream API)")
	assert.Equal(t, seenHTTP, seen.Take(), "the application's view (Stream API and RoundTripFields)")
}

// withoutLength is md without content-length (nil when nothing is left,
// as grpc-go reports no header).
func withoutLength(md metadata.MD) metadata.MD {
	if md == nil {
		return nil
	}
	md = md.Copy()
	delete(md, "content-length")
	return md
}

// TestStreamsFallBackToTheHandlerForWhatAcceptRefuses: a request Accept
// refuses reaches the http.Handler, and one whose header list is over
// MaxHeaderBytes is answered 431 whatever Accept says.
func TestStreamsFallBackToTheHandlerForWhatAcceptRefuses(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("x-path", "http") })
	ts := startServer(t, h, func(c *Config) {
		c.MaxHeaderBytes = 4 << 10
		c.Streams = &StreamHandler{
			Accept: func(fields []hpack.HeaderField) bool {
				for _, f := range fields {
					if f.Name == ":path" {
						return f.Value == "/frames"
					}
				}
				return false
			},
			Serve: func(st *Stream) {
				_ = st.WriteHeader(200, []hpack.HeaderField{{Name: "x-path", Value: "frames"}}, true)
			},
		}
	})
	rc := dialRaw(t, ts.addr)
	answer := func(id uint32) (status, path string) {
		f := rc.waitFor(func(f http2.Frame) bool { m, ok := f.(*http2.MetaHeadersFrame); return ok && m.StreamID == id })
		require.NotNil(t, f, "stream %d: no answer", id)
		m := f.(*http2.MetaHeadersFrame)
		for _, hf := range m.RegularFields() {
			if hf.Name == "x-path" {
				path = hf.Value
			}
		}
		return m.PseudoValue("status"), path
	}
	require.True(t, rc.headers(1, true, "GET", "/frames"))
	require.True(t, rc.headers(3, true, "GET", "/other"))
	require.True(t, rc.headers(5, true, "GET", "/frames", "x-big", strings.Repeat("a", 3000), "x-big2", strings.Repeat("b", 3000)))
	st, path := answer(1)
	assert.Equal(t, "200", st)
	assert.Equal(t, "frames", path)
	st, path = answer(3)
	assert.Equal(t, "200", st)
	assert.Equal(t, "http", path)
	st, _ = answer(5)
	assert.Equal(t, "431", st)
}

// TestStreamsResetAResponseServeLeftOpen: Serve returning without End
// resets the stream (INTERNAL_ERROR), so that a caller never takes a
// cut response for a whole one.
func TestStreamsResetAResponseServeLeftOpen(t *testing.T) {
	ts := startServer(t, http.NotFoundHandler(), func(c *Config) {
		c.Streams = &StreamHandler{
			Accept: func([]hpack.HeaderField) bool { return true },
			Serve: func(st *Stream) {
				_ = st.WriteHeader(200, nil, false)
				_ = st.Write([]byte("partial"))
			},
		}
	})
	resp, err := h2cClient(t).Get("http://" + ts.addr + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	var se http2.StreamError
	require.True(t, errors.As(err, &se), "got %v", err)
	assert.Equal(t, http2.ErrCodeInternal, se.Code)
}
