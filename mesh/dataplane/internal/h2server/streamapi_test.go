package h2server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
)

// TestStreamsKeepTheBufferLimit is TestUnreadRequestBodiesPastTheBufferLimitAreDroppedOldestFirst
// with the requests served by the Stream API: six unread 2 MiB uploads
// (1 MiB stream windows) go past a 4 MiB BufferLimit, the oldest lose
// their bytes and their Serve reads why, the unread bytes stay within
// the limit, and an upload read all along completes.
func TestStreamsKeepTheBufferLimit(t *testing.T) {
	const limit = 4 << 20
	var mu sync.Mutex
	held := map[string]*Stream{}
	after := map[string]error{}
	heldUnread := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, st := range held {
			st.s.c.mu.Lock()
			n += len(st.s.buf) - st.s.off
			st.s.c.mu.Unlock()
		}
		return n
	}
	ts := startServer(t, http.NotFoundHandler(), func(c *Config) {
		c.BufferLimit = limit
		c.Streams = &StreamHandler{
			Accept: func([]hpack.HeaderField) bool { return true },
			Serve: func(st *Stream) {
				if st.Path() == "/upload" {
					n, err := io.Copy(io.Discard, st.Body())
					if err != nil {
						st.Reset(http2.ErrCodeCancel)
						return
					}
					_ = st.WriteHeader(200, nil, false)
					_ = st.Write([]byte(strconv.FormatInt(n, 10)))
					_ = st.End(nil)
					return
				}
				mu.Lock()
				held[st.Path()] = st
				mu.Unlock()
				<-st.Context().Done()
				_, err := st.Body().Read(make([]byte, 1))
				mu.Lock()
				after[st.Path()] = err
				mu.Unlock()
			},
		}
	})
	c := h2cClient(t)
	c.Timeout = 0 // the holds last until the test ends
	url := "http://" + ts.addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	holdUploads(ctx, t, c, url, 6, 2<<20)
	testutil.Eventually(t, 20*time.Second, func() bool { return ts.errCount("buffer_limit") >= 2 },
		"six unread 1 MiB bodies go past a 4 MiB limit: at least two are dropped")
	assert.LessOrEqual(t, heldUnread(), limit, "the unread bodies stay within the limit")
	n, err := upload(t, c, url, 4<<20)
	require.NoError(t, err, "an upload read all along completes")
	assert.Equal(t, int64(4<<20), n)
	assert.LessOrEqual(t, heldUnread(), limit, "the unread bodies stay within the limit")

	dropped := int(ts.errCount("buffer_limit"))
	testutil.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(after) >= dropped
	}, "the Serve calls of dropped bodies see their streams end")
	mu.Lock()
	defer mu.Unlock()
	for p, err := range after {
		if assert.Error(t, err, p) {
			assert.Contains(t, err.Error(), "unread bytes were dropped", p)
		}
	}
}

// TestStreamsGetTheRequestAsReceived: the fields in order (repeated ones
// kept apart, Host folded into the authority), the body, and the
// trailers once the body ended; the response's fields a server may not
// send are left out.
func TestStreamsGetTheRequestAsReceived(t *testing.T) {
	type seen struct {
		method, authority, path string
		fields, trailers        []hpack.HeaderField
		body                    string
	}
	got := make(chan seen, 1)
	ts := startServer(t, http.NotFoundHandler(), func(c *Config) {
		c.Streams = &StreamHandler{
			Accept: func([]hpack.HeaderField) bool { return true },
			Serve: func(st *Stream) {
				b, err := io.ReadAll(st.Body())
				if err != nil {
					return
				}
				got <- seen{st.Method(), st.Authority(), st.Path(), st.Fields(), st.Trailers(), string(b)}
				_ = st.WriteHeader(200, []hpack.HeaderField{
					{Name: "x-ok", Value: "1"}, {Name: ":path", Value: "/smuggled"}, {Name: "connection", Value: "close"},
					{Name: "X-Upper", Value: "no"}, {Name: "x-bad", Value: "a\r\nb"}, {Name: "te", Value: "gzip"},
				}, false)
				_ = st.End([]hpack.HeaderField{{Name: "grpc-status", Value: "0"}, {Name: "transfer-encoding", Value: "chunked"}})
			},
		}
	})
	rc := dialRaw(t, ts.addr)
	b := rc.block(":method", "POST", ":scheme", "http", ":path", "/s/M?q=1", "host", "app:80", "x-a", "1", "x-b", "2", "x-a", "3", "expect", "100-continue")
	require.True(t, rc.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b, EndHeaders: true})
	}))
	require.True(t, rc.write(func(fr *http2.Framer) error { return fr.WriteData(1, false, []byte("hello")) }))
	tb := rc.block("x-t", "9")
	require.True(t, rc.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: tb, EndStream: true, EndHeaders: true})
	}))
	var s seen
	select {
	case s = <-got:
	case <-time.After(10 * time.Second): // hang guard only
		t.Fatal("Serve did not get the request")
	}
	assert.Equal(t, "POST", s.method)
	assert.Equal(t, "app:80", s.authority)
	assert.Equal(t, "/s/M?q=1", s.path)
	assert.Equal(t, []hpack.HeaderField{{Name: "x-a", Value: "1"}, {Name: "x-b", Value: "2"}, {Name: "x-a", Value: "3"}}, s.fields)
	assert.Equal(t, []hpack.HeaderField{{Name: "x-t", Value: "9"}}, s.trailers)
	assert.Equal(t, "hello", s.body)

	end := rc.waitFor(func(f http2.Frame) bool {
		m, ok := f.(*http2.MetaHeadersFrame)
		return ok && m.StreamID == 1 && m.StreamEnded()
	})
	require.NotNil(t, end, "the response ended")
	var blocks [][]hpack.HeaderField
	rc.mu.Lock()
	for _, f := range rc.frames {
		// A 100 Continue comes when Serve read before the data arrived.
		if m, ok := f.(*http2.MetaHeadersFrame); ok && m.StreamID == 1 && m.PseudoValue("status") != "100" {
			blocks = append(blocks, m.Fields)
		}
	}
	rc.mu.Unlock()
	require.Len(t, blocks, 2, "the response header, the trailers")
	assert.Equal(t, []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "x-ok", Value: "1"}}, blocks[0])
	assert.Equal(t, []hpack.HeaderField{{Name: "grpc-status", Value: "0"}}, blocks[1])
}

// TestStreamsRefuseCallsOutOfOrder: data or an end before the header, a
// second header, an out-of-range status and anything after the end are
// errors, and the response that was ended stays whole.
func TestStreamsRefuseCallsOutOfOrder(t *testing.T) {
	errs := make(chan []error, 1)
	ts := startServer(t, http.NotFoundHandler(), func(c *Config) {
		c.Streams = &StreamHandler{
			Accept: func([]hpack.HeaderField) bool { return true },
			Serve: func(st *Stream) {
				e := []error{st.Write([]byte("x")), st.End(nil), st.WriteHeader(99, nil, false), st.WriteHeader(1000, nil, false)}
				e = append(e, st.WriteHeader(200, nil, false), st.WriteHeader(200, nil, false), st.Write([]byte("ok")), st.End(nil))
				e = append(e, st.Write([]byte("late")), st.End(nil))
				errs <- e
			},
		}
	})
	resp, err := h2cClient(t).Get("http://" + ts.addr + "/")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "ok", string(b))
	e := <-errs
	assert.ErrorIs(t, e[0], errNoHeader)
	assert.ErrorIs(t, e[1], errNoHeader)
	assert.ErrorIs(t, e[2], errStatus)
	assert.ErrorIs(t, e[3], errStatus)
	assert.NoError(t, e[4])
	assert.ErrorIs(t, e[5], errHeaderSent)
	assert.NoError(t, e[6])
	assert.NoError(t, e[7])
	assert.ErrorIs(t, e[8], errStreamEnded)
	assert.ErrorIs(t, e[9], errStreamEnded)
}
