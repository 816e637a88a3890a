package dataplane

// The tap hooks of the external tests and benchmarks: each hands the call
// to the proxy's tap hub (internal/tap's testhooks.go says what they do).

// TapFeedForTest hands n requests' events to every tap open on p, waiting
// for room, and returns once the taps' buffers are empty.
func TapFeedForTest(p *Proxy, n int) { p.tap.FeedForTest(n) }

// TapEncodedForTest returns the encoded events TapFeedForTest(p, n) makes
// for the one tap open on p, in order.
func TapEncodedForTest(p *Proxy, n int) [][]byte { return p.tap.EncodedForTest(n) }

// TapPaceForTest hands n requests' events to every tap open on p as the
// data path does, perSecond requests a second.
func TapPaceForTest(p *Proxy, n, perSecond int) { p.tap.PaceForTest(n, perSecond) }
