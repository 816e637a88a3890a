package dataplane_test

import "github.com/weftmesh/weft/mesh/dataplane/internal/h2server"

// The HTTP/2 server's output queue bound and the largest queue any of
// its connections held in this process.
const (
	queueBound       = h2server.QueueBound
	queueBoundFrames = h2server.QueueBoundFrames
)

func queuedPeak() (bytes, frames int64) { return h2server.MaxQueued() }
