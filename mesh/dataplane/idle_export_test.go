package dataplane

// IdleParkedForTest is the number of copy directions parked in p's idle
// poller now (0 without one).
func IdleParkedForTest(p *Proxy) int { return p.idle.Load().parkedCount() }
