package dataplane

import "sync/atomic"

// The frame path's hooks for the external tests and benchmarks: the same
// proxy built with gRPC on the http.Handler path, or counting the calls
// the frame path serves.

// WithoutGRPCFramesForTest serves inbound gRPC calls on the http.Handler
// path, as before the frame path.
func WithoutGRPCFramesForTest() Option { return func(o *options) { o.noGRPCFrames = true } }

// WithGRPCFrameCountForTest counts in n the inbound calls the frame path
// serves.
func WithGRPCFrameCountForTest(n *atomic.Int64) Option {
	return func(o *options) { o.onGRPCFrame = func() { n.Add(1) } }
}
