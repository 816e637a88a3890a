package h2client_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAKeptResponseStaysItsOwnAfterLaterRequests: a response (its
// header, trailers and body) that the caller keeps belongs to its
// request alone while later requests on the same connection come and go
// (the header block decoding and the stream state are reused or
// recycled per connection; the response must not be); a body read after
// Close fails rather than returning another stream's bytes.
func TestAKeptResponseStaysItsOwnAfterLaterRequests(t *testing.T) {
	srv := startH2(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("n")
		w.Header().Set("X-Name", name)
		w.Header().Set("Trailer", "X-Trailer")
		_, _ = io.WriteString(w, name+"-body")
		w.Header().Set("X-Trailer", name)
	}))
	cc := srv.dial(t)

	first, err := cc.RoundTrip(request(t, "GET", srv.addr, "/?n=first", nil))
	require.NoError(t, err)
	b, err := io.ReadAll(first.Body)
	require.NoError(t, err)
	require.Equal(t, "first-body", string(b))
	require.NoError(t, first.Body.Close())

	cut, err := cc.RoundTrip(request(t, "GET", srv.addr, "/?n=cut", nil))
	require.NoError(t, err)
	one := make([]byte, 1)
	_, err = io.ReadFull(cut.Body, one)
	require.NoError(t, err)
	require.NoError(t, cut.Body.Close(), "closed before its end")

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "later-" + strconv.Itoa(i)
			resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/?n="+name, nil))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			assert.Equal(t, name+"-body", string(b))
			assert.Equal(t, name, resp.Header.Get("X-Name"))
			assert.Equal(t, name, resp.Trailer.Get("X-Trailer"))
		}()
	}
	wg.Wait()

	assert.Equal(t, "first", first.Header.Get("X-Name"), "the kept response's header is its own")
	assert.Equal(t, "first", first.Trailer.Get("X-Trailer"), "and so are its trailers")
	assert.Equal(t, 200, first.StatusCode)
	assert.Equal(t, "200 OK", first.Status)
	assert.Equal(t, "cut", cut.Header.Get("X-Name"))
	buf := make([]byte, 64)
	n, err := cut.Body.Read(buf)
	assert.Error(t, err, "a read after Close fails")
	assert.False(t, strings.Contains(string(buf[:n]), "later"), "and never yields another stream's bytes")
}
