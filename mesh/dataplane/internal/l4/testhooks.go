package l4

// What the dataplane package's tests read of the paths (its
// export_test.go files hand them on).

// IdleParked is the number of copy directions parked in the idle poller
// now (0 without one).
func (p *Paths) IdleParked() int { return p.idle.Load().Parked() }

// PeerH1Waiting is the number of requests waiting for a pooled HTTP/1.1
// connection to a peer proxy now.
func (p *Paths) PeerH1Waiting() int { return p.http.peerH1.Waiting() }
