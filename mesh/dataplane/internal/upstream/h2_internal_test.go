package upstream

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// The pool sends a replayable request again only when the HTTP/2 client
// says the server never processed it.
func TestOnlyErrorsTheClientMarksUnprocessedAreRetried(t *testing.T) {
	refused := fmt.Errorf("h2client: stream refused: %w: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeRefusedStream}, h2client.ErrUnprocessed)
	assert.True(t, unprocessed(refused))
	assert.True(t, unprocessed(fmt.Errorf("h2client: server going away: %w", h2client.ErrUnprocessed)))
	assert.False(t, unprocessed(fmt.Errorf("h2client: stream reset by the server: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeInternal})))
	assert.False(t, unprocessed(errors.New("h2client: connection lost: EOF")))
	// x/net's strings no longer mean anything here.
	assert.False(t, unprocessed(errors.New("http2: client conn is closed")))
}
