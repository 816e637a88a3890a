package h2server

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// TestAHandlerGoroutineServesTheConnectionsNextStream: sequential
// requests on one connection are served by the goroutine that served the
// last one (it keeps the stack it grew), and a stream whose handler
// blocks does not hold up the next: that one gets a goroutine of its
// own.
func TestAHandlerGoroutineServesTheConnectionsNextStream(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = io.WriteString(w, strconv.FormatUint(goroutineID(), 10))
	}), nil)
	client := h2cClient(t)
	get := func(path string) string {
		resp, err := client.Get("http://" + ts.addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	// A goroutine that finished its handler waits for the next stream
	// from just after its response is flushed: a client that answers
	// faster than it gets there meets a new goroutine (which then waits
	// too), so reuse is most of the time, not every time.
	const n = 20
	ids := map[string]bool{}
	for range n {
		ids[get("/")] = true
	}
	assert.LessOrEqual(t, len(ids), n/2, "goroutines serve the connection's next streams")

	blocked := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + ts.addr + "/block")
		if err == nil {
			resp.Body.Close()
		}
		blocked <- err
	}()
	// Whichever goroutine the blocked stream took, the next one is
	// served while it blocks.
	for range 3 {
		assert.NotEmpty(t, get("/"))
	}
	close(release)
	select {
	case err := <-blocked:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked stream did not end")
	}
	assert.Equal(t, int64(1), ts.conns.Load(), "one connection throughout")
}

// TestWaitingHandlerGoroutinesExitWhenIdleOrWhenTheConnectionEnds: the
// goroutines a burst of concurrent streams leaves waiting exit within
// handlerIdle, and ServeConn returns only once none is left.
func TestWaitingHandlerGoroutinesExitWhenIdleOrWhenTheConnectionEnds(t *testing.T) {
	const n = 20
	gate := make(chan struct{})
	arrived := make(chan struct{}, n)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-gate
	}), nil)
	before := runtime.NumGoroutine()
	client := h2cClient(t)
	done := make(chan error, n)
	for range n {
		go func() {
			resp, err := client.Get("http://" + ts.addr + "/")
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the handlers did not all start")
		}
	}
	close(gate)
	for range n {
		require.NoError(t, <-done)
	}
	// n handler goroutines now wait for streams; within handlerIdle they
	// exit. What stays is the connection's own (its read loops and the
	// client's): fewer than the n test goroutines that came and went.
	require.Eventually(t, func() bool { return runtime.NumGoroutine() < before+n/2 },
		handlerIdle+5*time.Second, 20*time.Millisecond, "the waiting goroutines exit after %v", handlerIdle)

	// And when the connection ends, ServeConn waits for those waiting.
	get := func() {
		resp, err := client.Get("http://" + ts.addr + "/")
		require.NoError(t, err)
		resp.Body.Close()
	}
	get()
	client.CloseIdleConnections()
	require.Eventually(t, func() bool { return ts.ended.Load() == ts.conns.Load() }, 10*time.Second, 10*time.Millisecond, "the connection ends")
}
