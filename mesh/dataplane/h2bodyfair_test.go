package dataplane_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// zeroBytes is an endless reader of zero bytes.
type zeroBytes struct{}

func (zeroBytes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestUploadsTheApplicationDoesNotReadDoNotStallOthersOnAPeerConnection
// is the request side of issue 27's finding 3. The client proxy carries
// every local client's HTTP/2 requests to the server proxy on one pooled
// connection; on main before this change the server proxy's HTTP/2
// server gave that connection's window back only as its handlers read
// request bodies, so uploads the application does not read (each
// stalled at its own stream window toward the application) took the
// whole 4 MiB connection window and every other client's upload on the
// peer connection stalled. The application's own HTTP/2 server is given
// windows that do not stall its side (1 MiB per stream, 64 MiB per
// connection), so what is measured is the peer connection.
func TestUploadsTheApplicationDoesNotReadDoNotStallOthersOnAPeerConnection(t *testing.T) {
	app := startHTTPApp(t, func(s *http.Server) {
		s.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 1 << 20, MaxReceiveBufferPerConnection: 64 << 20}
	})
	// The app's own routes read bodies first, except /echo and
	// /stream-echo: /echo?hold never reads; /stream-echo reads all and
	// answers the length.
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			<-r.Context().Done()
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
	}
	hp := startHTTPPair(t, httpPairOptions{app: app})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attacker := h2cClient()
	attacker.Timeout = 0 // the holds last until the test ends
	defer attacker.CloseIdleConnections()
	const holds = 6
	for i := range holds {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hp.url("/echo?hold="+strconv.Itoa(i)), io.LimitReader(zeroBytes{}, 8<<20))
		require.NoError(t, err)
		req.ContentLength = 8 << 20
		go func() {
			if resp, err := attacker.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// The server proxy has read 9.5 MiB of the uploads: at most 1 MiB
	// each went on to the application, the rest waits in the server
	// proxy (before the change: in the peer connection's 4 MiB window,
	// of which at most half a MiB is left now).
	testutil.Eventually(t, 30*time.Second, func() bool {
		return hp.b.metric(t, "tcp_read_bytes_total", `direction="inbound"`) >= 9.5*(1<<20)
	}, "the unread uploads reached the server proxy")

	victim := h2cClient()
	defer victim.CloseIdleConnections()
	vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second) // hang guard only
	defer vcancel()
	req, err := http.NewRequestWithContext(vctx, http.MethodPost, hp.url("/stream-echo"), io.LimitReader(zeroBytes{}, 1<<20))
	require.NoError(t, err)
	req.ContentLength = 1 << 20
	resp, err := victim.Do(req)
	require.NoError(t, err, "the upload stalled behind the unread ones")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, strconv.Itoa(1<<20), string(body), "the application read the whole upload")
	assert.Equal(t, int32(1), hp.inB.accepted.Load(), "every upload shared one peer connection")
}
