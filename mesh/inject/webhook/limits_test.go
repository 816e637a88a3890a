package webhook_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// podOfReviewSize returns a pod whose review is exactly size bytes.
func podOfReviewSize(t *testing.T, size int) []byte {
	t.Helper()
	pod := appPod("shop", map[string]string{"pad": ""})
	base := len(podReview(t, "big", pod))
	require.Less(t, base, size)
	pod.Annotations["pad"] = strings.Repeat("x", size-base)
	body := podReview(t, "big", pod)
	require.Len(t, body, size)
	return body
}

// TestInjectorTakesTheLargestPodTheAPIServerCanSend: a pod of 3 MiB (the
// API server's limit on a write request) is injected.
func TestInjectorTakesTheLargestPodTheAPIServerCanSend(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"})))
	pod := appPod("shop", map[string]string{"big": strings.Repeat("x", 3<<20)})
	status, body := post(t, client, url, podReview(t, "big", pod))
	require.Equal(t, http.StatusOK, status, string(body))
	resp := decodeResponse(t, body)
	assert.True(t, resp.Allowed)
	assert.True(t, hasContainer(applyResponse(t, pod, resp), vocab.ProxyContainerName), "%v", resp.AuditAnnotations)
}

// TestOversizeReviewsAreRefusedWith413: one byte over the limit is
// refused, whether the length is declared or the body is chunked, by the
// injector (4 MiB) and the validator (2 MiB).
func TestOversizeReviewsAreRefusedWith413(t *testing.T) {
	_, injURL, client := newInjector(t, inject.NewStaticNamespaces())
	valURL, valClient := newValidator(t)
	for _, tc := range []struct {
		name   string
		url    string
		client *http.Client
		limit  int
	}{
		{"injector", injURL, client, webhook.MaxBodyBytes},
		{"validator", valURL, valClient, webhook.MaxValidateBodyBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, tc.client, tc.url, podOfReviewSize(t, tc.limit+1))
			assert.Equal(t, http.StatusRequestEntityTooLarge, status)
			assert.Contains(t, string(body), fmt.Sprintf("exceeds the limit of %d bytes", tc.limit))

			// Chunked: no Content-Length to refuse early; the reader stops
			// at the limit.
			req, err := http.NewRequest(http.MethodPost, tc.url, struct{ io.Reader }{bytes.NewReader(podOfReviewSize(t, tc.limit+1))})
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := tc.client.Do(req)
			require.NoError(t, err)
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
			assert.Contains(t, string(msg), "exceeds the limit")

			// At the limit exactly, the review is read and answered.
			status, body = post(t, tc.client, tc.url, podOfReviewSize(t, tc.limit))
			assert.Equal(t, http.StatusOK, status, string(body))
		})
	}
}

// serveTLSWithHTTP2 is serveTLS with HTTP/2 negotiated, as the API server
// speaks to webhooks.
func serveTLSWithHTTP2(t testing.TB, h http.Handler) (string, *http.Client) {
	t.Helper()
	ca := testutil.NewAnchor(t, testutil.CertOptions{Name: "webhook-ca.test"})
	leaf := ca.Leaf(t, testutil.CertOptions{Name: "weft-injector.weft.svc", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = testutil.Listen(t)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: testutil.Pool(ca), MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true,
	}}
	t.Cleanup(client.CloseIdleConnections)
	return srv.URL, client
}

// TestReviewsBeyondTheConcurrencyCapGet429AtOnce: with two reviews parked
// in the namespace lookup and a cap of two shared by the injector and the
// validator, a third review of either kind is answered 429 with
// Retry-After, without its body being read (a body that never arrives
// does not hold it), over HTTP/1.1 and HTTP/2; once the parked ones
// finish, reviews are served.
func TestReviewsBeyondTheConcurrencyCapGet429AtOnce(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			limiter, err := webhook.NewLimiter(2)
			require.NoError(t, err)
			nss := &parkedNamespaces{entered: make(chan struct{}, 2), release: make(chan struct{})}
			inj, err := webhook.NewInjector(testValues(t), nss, webhook.WithLimiter(limiter))
			require.NoError(t, err)
			val, err := webhook.NewValidator(webhook.WithLimiter(limiter))
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle("/inject", inj)
			mux.Handle("/validate", val)
			serve := serveTLS
			if proto == "HTTP/2.0" {
				serve = serveTLSWithHTTP2
			}
			base, client := serve(t, mux)

			review := podReview(t, "p", appPod("shop", nil))
			parked := make(chan int, 2)
			for range 2 {
				go func() {
					resp, err := client.Post(base+"/inject", "application/json", bytes.NewReader(review))
					if err != nil {
						parked <- -1
						return
					}
					resp.Body.Close()
					parked <- resp.StatusCode
				}()
			}
			ctx := testutil.Context(t, 0)
			for range 2 {
				select {
				case <-nss.entered:
				case <-ctx.Done():
					t.Fatal("the first two reviews did not reach the namespace lookup")
				}
			}
			assert.Equal(t, 2, limiter.InFlight())

			for _, path := range []string{"/inject", "/validate"} {
				// The body is a pipe nobody writes to: a server that
				// read it before answering would wait forever.
				pr, pw := io.Pipe()
				defer pw.Close()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, pr)
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				require.NoError(t, err, path)
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, proto, resp.Proto)
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
				assert.Equal(t, "1", resp.Header.Get("Retry-After"), path)
				assert.Contains(t, string(msg), "too many AdmissionReviews in flight", path)
			}
			assert.Equal(t, uint64(2), limiter.Refused())

			close(nss.release)
			for range 2 {
				assert.Equal(t, http.StatusOK, <-parked)
			}
			// A handler gives its slot back after its answer is written.
			testutil.Eventually(t, 0, func() bool { return limiter.InFlight() == 0 }, "the slots to be given back")
			status, body := post(t, client, base+"/inject", review)
			assert.Equal(t, http.StatusOK, status, string(body))
		})
	}
}

func TestNewLimiterRefusesZero(t *testing.T) {
	_, err := webhook.NewLimiter(0)
	assert.ErrorContains(t, err, "webhook: ")
}

// TestAPodThatIsNotAPodIsDeniedWithItsUID: the object is decoded while
// the review is parsed; when it is not a Pod the review still gets an
// answer carrying its uid.
func TestAPodThatIsNotAPodIsDeniedWithItsUID(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces())
	body := bytes.Replace(podReview(t, "odd", appPod("shop", nil)), []byte(`"containers":[`), []byte(`"containers":7,"x":[`), 1)
	status, out := post(t, client, url, body)
	require.Equal(t, http.StatusOK, status, string(out))
	resp := decodeResponse(t, out)
	assert.Equal(t, "odd", string(resp.UID))
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "request.object is not a Pod")

	// A pod review whose object is null or missing is denied the same way.
	for _, obj := range []string{`,"object":null`, ``} {
		raw := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"none",` +
			`"kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"shop","operation":"CREATE"` + obj + `}}`
		status, out := post(t, client, url, []byte(raw))
		require.Equal(t, http.StatusOK, status, "%s: %s", obj, out)
		resp := decodeResponse(t, out)
		assert.Equal(t, "none", string(resp.UID))
		assert.Contains(t, resp.Result.Message, "request.object is not a Pod", obj)
	}
}

var _ inject.NamespaceLookup = (*parkedNamespaces)(nil)
