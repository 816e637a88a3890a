package dataplane

// IdleParkedForTest is the number of copy directions parked in p's idle
// poller now (0 without one).
func IdleParkedForTest(p *Proxy) int { return p.paths.IdleParked() }

// PeerH1WaitingForTest is the number of requests waiting for a pooled
// HTTP/1.1 connection to a peer proxy now.
func PeerH1WaitingForTest(p *Proxy) int { return p.paths.PeerH1Waiting() }
