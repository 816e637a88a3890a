package upstream

// UpstreamsForTest is the number of upstreams the HTTP/2 pool holds an
// entry for.
func (cp *H2Pool) UpstreamsForTest() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return len(cp.m)
}

// EndpointsForTest is the number of peer endpoints the HTTP/1.1 pool
// holds a client for.
func (pp *PeerH1Pool) EndpointsForTest() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return len(pp.m)
}

// PeerConnReusableForTest is the idle check of the HTTP/1.1 pool's
// connections.
var PeerConnReusableForTest = peerConnReusable
