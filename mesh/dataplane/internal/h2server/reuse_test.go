package h2server

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// trailerOf returns the value of field name in stream id's trailer
// block (a HEADERS frame with END_STREAM), waiting for it.
func (h *rawClient) trailerOf(id uint32, name string) (string, bool) {
	f := h.waitFor(func(f http2.Frame) bool {
		m, ok := f.(*http2.MetaHeadersFrame)
		return ok && m.StreamID == id && m.StreamEnded() && m.PseudoValue("status") == ""
	})
	if f == nil {
		return "", false
	}
	for _, hf := range f.(*http2.MetaHeadersFrame).Fields {
		if hf.Name == name {
			return hf.Value, true
		}
	}
	return "", true
}

// TestTrailersOfAResponseWaitingForWindowAreItsOwn: a response whose
// body waits for the client's window holds its trailer fields while the
// connection's lock is released; another response finishing meanwhile
// must not write its trailers into the same (reused) slice.
func TestTrailersOfAResponseWaitingForWindowAreItsOwn(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		if r.URL.Path == "/body" {
			_, _ = w.Write([]byte("hello"))
		}
		w.Header().Set("X-T", r.URL.Query().Get("t"))
	}), nil)
	h := dialRaw(t, ts.addr)

	// A response with trailers leaves the connection's scratch slice
	// behind.
	require.True(t, h.headers(1, true, "GET", "/?t=warm"))
	v, ok := h.trailerOf(1, "x-t")
	require.True(t, ok, "the warm-up response ends")
	require.Equal(t, "warm", v)

	// Stream windows of one byte: the next body waits after its first.
	require.True(t, h.write(func(fr *http2.Framer) error {
		return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	}))
	require.True(t, h.headers(3, true, "GET", "/body?t=mine"))
	require.NotNil(t, h.waitFor(func(f http2.Frame) bool {
		return f.Header().Type == http2.FrameData && f.Header().StreamID == 3
	}), "the first byte of the body arrives, the rest waits for window")

	// Meanwhile a bodyless response with trailers finishes.
	require.True(t, h.headers(5, true, "GET", "/?t=other"))
	v, ok = h.trailerOf(5, "x-t")
	require.True(t, ok, "the bodyless response ends without window")
	require.Equal(t, "other", v)

	require.True(t, h.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(3, 1<<20) }))
	v, ok = h.trailerOf(3, "x-t")
	require.True(t, ok, "the waiting response ends once granted window")
	assert.Equal(t, "mine", v, "its trailers are its own")
}

// TestAHandlerKeepingItsRequestSeesOnlyItsOwnStream: the request, its
// body and the response header a handler keeps past its return belong
// to that stream alone, whatever the connection's later streams carry; a
// late read of the body fails instead of returning another stream's
// bytes.
func TestAHandlerKeepingItsRequestSeesOnlyItsOwnStream(t *testing.T) {
	type kept struct {
		r    *http.Request
		hdr  http.Header
		name string
	}
	keptc := make(chan kept, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Name")
		w.Header().Set("X-Name", name)
		if name == "first" {
			buf := make([]byte, 2) // read part of the body, leave the rest
			_, _ = io.ReadFull(r.Body, buf)
			keptc <- kept{r, w.Header(), name}
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}), nil)
	client := h2cClient(t)
	post := func(name, body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, "http://"+ts.addr+"/", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("X-Name", name)
		resp, err := client.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp := post("first", "first-body-bytes")
	resp.Body.Close()
	var k kept
	select {
	case k = <-keptc:
	case <-time.After(10 * time.Second):
		t.Fatal("the first handler did not run")
	}

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "later-" + strconv.Itoa(i)
			resp := post(name, name+"-body")
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			assert.Equal(t, name+"-body", string(b))
			assert.Equal(t, name, resp.Header.Get("X-Name"))
		}()
	}
	wg.Wait()

	assert.Equal(t, "first", k.r.Header.Get("X-Name"), "the kept request's header is its own")
	assert.Equal(t, "first", k.hdr.Get("X-Name"), "the kept response header is its own")
	buf := make([]byte, 64)
	n, err := k.r.Body.Read(buf)
	assert.Error(t, err, "a read after the handler returned fails")
	assert.NotContains(t, string(buf[:n]), "later", "and never yields another stream's bytes")
}
