package h2server

import (
	"context"
	"fmt"
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

// Request bodies on a shared connection: a peer proxy's pooled
// connection carries many clients' requests to this server, so one
// upload its handler does not read must hold back that upload only.

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// unread reports the bytes buffered for the request body r and not yet
// read (r's body is the server's own).
func unread(r *http.Request) int {
	s := r.Body.(*body).s
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return len(s.buf) - s.off
}

// holdServer answers /hold?i=N by never reading the body: it waits for
// the stream to end, then records what a Read returns. /upload reads the
// whole body and answers its length.
type holdServer struct {
	*testServer
	mu    sync.Mutex
	held  map[int]*http.Request
	after map[int]error // a hold's Read once its stream ended
}

func startHoldServer(t *testing.T, tweak func(*Config)) *holdServer {
	hs := &holdServer{held: map[int]*http.Request{}, after: map[int]error{}}
	hs.testServer = startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upload" {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, n)
			return
		}
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		hs.mu.Lock()
		hs.held[i] = r
		hs.mu.Unlock()
		<-r.Context().Done()
		_, err := r.Body.Read(make([]byte, 1))
		hs.mu.Lock()
		hs.after[i] = err
		hs.mu.Unlock()
	}), tweak)
	return hs
}

// heldUnread sums the unread body bytes of the held requests.
func (hs *holdServer) heldUnread() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, r := range hs.held {
		n += unread(r)
	}
	return n
}

// holdUploads starts n uploads of size bytes to /hold on c, each under
// ctx (cancelled by the test when it ends).
func holdUploads(ctx context.Context, t *testing.T, c *http.Client, url string, n int, size int64) {
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hold?i="+strconv.Itoa(i), io.LimitReader(zeros{}, size))
		require.NoError(t, err)
		req.ContentLength = size
		go func() {
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
}

// upload posts size bytes to /upload on c under a hang guard and
// returns what the server read.
func upload(t *testing.T, c *http.Client, url string, size int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // hang guard only
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/upload", io.LimitReader(zeros{}, size))
	require.NoError(t, err)
	req.ContentLength = size
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return strconv.ParseInt(string(b), 10, 64)
}

func TestRequestBodiesNobodyReadsDoNotStallOtherUploads(t *testing.T) {
	// The server side of issue 27's finding 3: on dc15bc3 request bytes
	// gave their connection window back only when a handler read them,
	// so four 1 MiB uploads nobody read held the whole 4 MiB connection
	// window and every other upload on the connection stalled.
	hs := startHoldServer(t, nil) // windows: 1 MiB per stream, 4 MiB per connection
	c := h2cClient(t)
	c.Timeout = 0 // the holds last until the test ends
	url := "http://" + hs.addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const holds = 6
	holdUploads(ctx, t, c, url, holds, 2<<20)
	// Every byte the client could send has arrived: the connection
	// window (4 MiB) is used up on dc15bc3, the six stream windows
	// (6 MiB) now. Less a frame per stream for the client's own timing.
	testutil.Eventually(t, 20*time.Second, func() bool { return hs.heldUnread() >= 4<<20-holds*(16<<10) },
		"the unread uploads took what the windows allow")

	n, err := upload(t, c, url, 1<<20)
	require.NoError(t, err, "the upload stalled behind the unread ones")
	assert.Equal(t, int64(1<<20), n)
	assert.Equal(t, int64(1), hs.conns.Load(), "one connection carried every upload")
	assert.LessOrEqual(t, hs.heldUnread(), holds<<20, "an unread body holds at most its stream window")
}

func TestUnreadRequestBodiesPastTheBufferLimitAreDroppedOldestFirst(t *testing.T) {
	// With the connection window given back on receipt, unread bodies
	// hold one stream window each; BufferLimit bounds them all. Here 1 MiB
	// stream windows under a 4 MiB limit: six uploads nobody reads go
	// past it, and the oldest lose their bytes (their streams reset, the
	// handlers' Read failing with the reason, never a short body with
	// io.EOF); an upload read all along completes.
	const limit = 4 << 20
	hs := startHoldServer(t, func(c *Config) { c.BufferLimit = limit })
	c := h2cClient(t)
	c.Timeout = 0 // the holds last until the test ends
	url := "http://" + hs.addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const holds = 6
	holdUploads(ctx, t, c, url, holds, 2<<20)
	testutil.Eventually(t, 20*time.Second, func() bool { return hs.errCount("buffer_limit") >= 2 },
		"six unread 1 MiB bodies go past a 4 MiB limit: at least two are dropped")
	assert.LessOrEqual(t, hs.heldUnread(), limit, "the unread bodies stay within the limit")
	n, err := upload(t, c, url, 4<<20)
	require.NoError(t, err, "an upload read all along completes")
	assert.Equal(t, int64(4<<20), n)
	assert.LessOrEqual(t, hs.heldUnread(), limit, "the unread bodies stay within the limit")

	// The handler of each dropped body reads the reason.
	dropped := int(hs.errCount("buffer_limit"))
	testutil.Eventually(t, 20*time.Second, func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		return len(hs.after) >= dropped
	}, "the handlers of dropped bodies see their streams end")
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i, err := range hs.after {
		if assert.Error(t, err, "hold %d", i) {
			assert.Contains(t, err.Error(), "unread bytes were dropped", "hold %d", i)
		}
	}
	assert.Equal(t, int64(1), hs.conns.Load(), "one connection carried every upload")
}

func TestARequestBodyBufferStaysWithinTwiceTheStreamWindow(t *testing.T) {
	// On dc15bc3 bytes already read stayed in the body's buffer until a
	// read emptied it: a handler always a byte behind (a proxy copying to
	// a slower upstream) kept the whole body. The reader here leaves one
	// byte unread each time; the upload is ten stream windows.
	const window = 128 << 10
	var peakCap, total int
	done := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		s := r.Body.(*body).s
		c := s.c
		p := make([]byte, 4*window)
		for {
			c.mu.Lock()
			for len(s.buf)-s.off < 2 && s.bodyErr == nil {
				s.cond.Wait()
			}
			n, last := len(s.buf)-s.off-1, s.bodyErr != nil
			peakCap = max(peakCap, cap(s.buf))
			c.mu.Unlock()
			if last {
				rest, _ := io.Copy(io.Discard, r.Body)
				total += int(rest)
				return
			}
			k, err := r.Body.Read(p[:n])
			total += k
			if err != nil {
				return
			}
		}
	}), func(c *Config) { c.StreamWindow = window })
	resp, err := h2cClient(t).Post("http://"+ts.addr+"/", "application/octet-stream", io.LimitReader(zeros{}, 10*window))
	require.NoError(t, err)
	resp.Body.Close()
	<-done
	assert.Equal(t, 10*window, total, "the whole body was read")
	assert.LessOrEqual(t, peakCap, 2*window, "the body buffer stays within twice the stream window")
}

func TestTrailersOnABodyDroppedForTheBufferLimitAreIgnored(t *testing.T) {
	// A client that has not yet seen the reset of its dropped upload may
	// still send its trailers: they end nothing but that stream (other
	// streams on the connection are other clients' requests).
	hs := startHoldServer(t, func(c *Config) { c.StreamWindow, c.BufferLimit = 65535, 65535 })
	sc := dialSync(t, hs.addr)
	post := func(id uint32) {
		sc.ebuf.Reset()
		for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/hold?i=" + strconv.Itoa(int(id))}} {
			_ = sc.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		require.NoError(t, sc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: sc.ebuf.Bytes(), EndHeaders: true}))
	}
	post(1)
	post(3)
	chunk := make([]byte, 10000)
	for range 4 {
		require.NoError(t, sc.fr.WriteData(1, false, chunk))
	}
	for range 4 { // 80,000 bytes unread: stream 1's, older, are dropped
		require.NoError(t, sc.fr.WriteData(3, false, chunk))
	}
	sc.readUntil("the drop", nil, func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == 1 && r.ErrCode == http2.ErrCodeCancel
	})
	sc.ebuf.Reset()
	_ = sc.enc.WriteField(hpack.HeaderField{Name: "x-checksum", Value: "1"})
	require.NoError(t, sc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: sc.ebuf.Bytes(), EndStream: true, EndHeaders: true}))
	sc.alive("after trailers on the dropped stream")
	assert.Equal(t, int64(1), hs.errCount("buffer_limit"))
	testutil.Eventually(t, 20*time.Second, func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		return hs.after[1] != nil
	}, "the handler of the dropped body sees its stream end")
	hs.mu.Lock()
	defer hs.mu.Unlock()
	assert.ErrorContains(t, hs.after[1], "unread bytes were dropped")
}
