package dataplane

import "sync/atomic"

// The frame path's hooks for the external tests and benchmarks: the same
// proxy built with gRPC on the http.Handler path, or counting the calls
// the frame path serves.

// WithoutGRPCFramesForTest serves gRPC calls on the http.Handler path
// (both directions), as before the frame path.
func WithoutGRPCFramesForTest() Option { return func(o *options) { o.noGRPCFrames = true } }

// WithGRPCFrameCountForTest counts in n the inbound calls the frame path
// serves.
func WithGRPCFrameCountForTest(n *atomic.Int64) Option {
	return func(o *options) { o.onGRPCFrame = func() { n.Add(1) } }
}

// WithGRPCOutFrameCountForTest counts in n the outbound calls (from the
// application) the frame path serves.
func WithGRPCOutFrameCountForTest(n *atomic.Int64) Option {
	return func(o *options) { o.onGRPCOutFrame = func() { n.Add(1) } }
}
