package dataplane_test

//lint:file-ignore SA1019 this test reproduces what x/net's own HTTP/2 client sends (a WINDOW_UPDATE every 4 KiB it reads), so it must be that client.

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/keepalive"
)

// The HTTP/2 server's flood limits must never end the connection of a
// real client doing real work, however fast: the attack benchmark saw
// Go's HTTP/2 client (64 KiB responses) and grpc-go closed for a
// "control flood" at 200 requests a second. Each test here drives one
// connection of a real client through a proxy pair (so the client
// proxy's server sees that client, and the server proxy's server sees
// the client proxy's pooled connection) and asserts that no connection
// was ended for abuse and that every request succeeded.

// noAbuse asserts that neither proxy ended a connection for abuse.
func noAbuse(t *testing.T, rs ...*running) {
	t.Helper()
	for i, r := range rs {
		assert.LessOrEqual(t, r.metric(t, "http_protocol_errors_total", `reason="http2-abuse"`), 0.0,
			"proxy %d ended a connection for abuse", i)
	}
}

// countingDialer dials plain TCP and counts the connections.
type countingDialer struct{ dials atomic.Int32 }

func (d *countingDialer) dial(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
	d.dials.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// TestGoHTTP2ClientFetchingLargeResponsesIsNeverClosedForAbuse runs
// x/net's HTTP/2 client (prior knowledge, one connection) fetching 64 KiB
// and 1 MiB responses concurrently through a proxy pair. That client
// gives window back every 4 KiB it reads, for the connection and for the
// stream, also after the stream ended on the server's side: tens of
// WINDOW_UPDATEs per response, each restoring window the server used.
func TestGoHTTP2ClientFetchingLargeResponsesIsNeverClosedForAbuse(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{})
	d := &countingDialer{}
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: d.dial, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	const (
		workers = 16
		small   = 64 << 10
		large   = 1 << 20
		total   = 2000 // one in twenty is large
	)
	var next, failed atomic.Int32
	var firstErr sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				size := small
				if i%20 == 0 {
					size = large
				}
				n, err := fetch(client, hp.url("/big?n="+strconv.Itoa(size)))
				if err == nil && n != int64(size) {
					err = fmt.Errorf("%d of %d bytes", n, size)
				}
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { t.Errorf("request %d: %v", i, err) })
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, failed.Load(), "every request succeeds")
	assert.Equal(t, int32(1), d.dials.Load(), "one connection carried every request")
	noAbuse(t, hp.a, hp.b)
}

// fetch GETs url and reads the whole body (in io.Copy's 32 KiB reads).
func fetch(c *http.Client, url string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return io.Copy(io.Discard, resp.Body)
}

// TestGRPCClientsWithLargeMessagesAreNeverClosedForAbuse runs grpc-go
// clients on one connection each through a proxy pair: unary calls with
// 64 KiB messages both ways and server-streaming and bidirectional calls
// with 256 KiB messages, concurrently. grpc-go's bandwidth estimator is
// on (no fixed window): it sends a PING for each round trip while DATA
// arrives, each after a WINDOW_UPDATE returning what it received so far,
// and SETTINGS as it grows its windows. The second client also sends
// keepalive PINGs, as often as grpc-go allows (10 s), even without
// calls in flight.
func TestGRPCClientsWithLargeMessagesAreNeverClosedForAbuse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message int // bytes each way in a unary call
		opts    []grpc.DialOption
	}{
		{"bdp estimator", 64 << 10, nil},
		// Small messages keep the estimator's window small, so it pings on
		// every round trip for as long as calls go on.
		{"bdp estimator small messages", 100, nil},
		{"keepalive", 64 << 10, []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gp := startGRPCPair(t, nil)
			d := &countingDialer{}
			opts := append([]grpc.DialOption{
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
					return d.dial(ctx, "tcp", addr, nil)
				}),
			}, tc.opts...)
			cc, err := grpc.NewClient("passthrough:///"+gp.addr, opts...)
			require.NoError(t, err)
			defer cc.Close()
			client := testgrpc.NewTestServiceClient(cc)

			const (
				workers  = 16
				unary    = 2000
				streams  = 40
				streamed = 256 << 10
				perCall  = 8 // messages per streaming call
			)
			message := tc.message
			var next, failed atomic.Int32
			var firstErr sync.Once
			fail := func(what string, err error) {
				failed.Add(1)
				firstErr.Do(func() { t.Errorf("%s: %v", what, err) })
			}
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > unary+streams {
							return
						}
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
						var err error
						switch {
						case i%50 == 0 && i/50%2 == 0:
							err = serverStream(ctx, client, perCall, streamed)
						case i%50 == 0:
							err = duplex(ctx, client, perCall, streamed)
						default:
							var resp *testgrpc.SimpleResponse
							resp, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: int32(message), Payload: &testgrpc.Payload{Body: make([]byte, message)}})
							if err == nil && len(resp.GetPayload().GetBody()) != message {
								err = fmt.Errorf("%d of %d bytes", len(resp.GetPayload().GetBody()), message)
							}
						}
						cancel()
						if err != nil {
							fail("call "+strconv.Itoa(int(i)), err)
						}
					}
				}()
			}
			wg.Wait()
			assert.Zero(t, failed.Load(), "every call succeeds")
			assert.Equal(t, int32(1), d.dials.Load(), "one connection carried every call")
			noAbuse(t, gp.a, gp.b)
		})
	}
}

// serverStream asks for n messages of size bytes and reads them.
func serverStream(ctx context.Context, c testgrpc.TestServiceClient, n, size int) error {
	req := &testgrpc.StreamingOutputCallRequest{}
	for range n {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: int32(size)})
	}
	st, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		return err
	}
	got := 0
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(m.GetPayload().GetBody()) != size {
			return fmt.Errorf("message of %d bytes, want %d", len(m.GetPayload().GetBody()), size)
		}
		got++
	}
	if got != n {
		return fmt.Errorf("%d of %d messages", got, n)
	}
	return nil
}

// duplex sends n messages of size bytes, each asking for one of size
// bytes back, and reads each answer before sending the next.
func duplex(ctx context.Context, c testgrpc.TestServiceClient, n, size int) error {
	st, err := c.FullDuplexCall(ctx)
	if err != nil {
		return err
	}
	body := make([]byte, size)
	for range n {
		err := st.Send(&testgrpc.StreamingOutputCallRequest{
			ResponseParameters: []*testgrpc.ResponseParameters{{Size: int32(size)}},
			Payload:            &testgrpc.Payload{Body: body},
		})
		if err != nil {
			return err
		}
		m, err := st.Recv()
		if err != nil {
			return err
		}
		if len(m.GetPayload().GetBody()) != size {
			return fmt.Errorf("message of %d bytes, want %d", len(m.GetPayload().GetBody()), size)
		}
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	if _, err := st.Recv(); err != io.EOF {
		return fmt.Errorf("after the last message: %v", err)
	}
	return nil
}
