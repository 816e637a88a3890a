package grpclimit

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Watches caps the streaming RPCs (watches) a server holds at once: in
// total, and per peer address. A stream beyond either cap ends at once
// with RESOURCE_EXHAUSTED, before its handler runs; the streams already
// open are not touched. It is safe for concurrent use, and one Watches may
// be shared by several servers so that they draw from one budget.
//
// The per-peer count is keyed by the peer's IP address (the whole address
// for non-IP transports). Clients behind one NAT share it.
type Watches struct{ c *counter }

// NewWatches returns a limiter of max watches in total and perPeer per
// peer address. A value of zero or less means no limit of that kind.
func NewWatches(max, perPeer int) *Watches { return &Watches{c: newCounter(max, perPeer)} }

// InUse returns the number of watches open now.
func (w *Watches) InUse() int { return w.c.inUse() }

// Refused returns how many watches were refused since the start.
func (w *Watches) Refused() uint64 { return w.c.refused.Load() }

// StreamServerInterceptor counts every streaming RPC while its handler
// runs. Install it with grpc.ChainStreamInterceptor; [NewServer] does.
func (w *Watches) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		release, err := w.c.acquire(peerKey(ss.Context()), func(which string, n int) error {
			if which == "the server" {
				return status.Errorf(codes.ResourceExhausted,
					"grpclimit: %s refused: the server holds its maximum of %d watches; retry later or against another replica", info.FullMethod, n)
			}
			return status.Errorf(codes.ResourceExhausted, "grpclimit: %s refused: %s holds its maximum of %d watches", info.FullMethod, which, n)
		})
		if err != nil {
			return err
		}
		defer release()
		return handler(srv, ss)
	}
}

// counter counts what clients hold, in total and per peer address.
type counter struct {
	max, perPeer int

	mu    sync.Mutex
	total int
	peers map[string]int

	refused atomic.Uint64
}

func newCounter(max, perPeer int) *counter {
	return &counter{max: max, perPeer: perPeer, peers: map[string]int{}}
}

func (c *counter) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// acquire counts one more for key, or returns the error refusal builds
// from what is full ("the server" or "peer ADDR") and its cap.
func (c *counter) acquire(key string, refusal func(which string, n int) error) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max > 0 && c.total >= c.max {
		c.refused.Add(1)
		return nil, refusal("the server", c.max)
	}
	if c.perPeer > 0 && c.peers[key] >= c.perPeer {
		c.refused.Add(1)
		return nil, refusal("peer "+key, c.perPeer)
	}
	c.total++
	c.peers[key]++
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.total--
		if c.peers[key]--; c.peers[key] <= 0 {
			delete(c.peers, key)
		}
	}), nil
}

// peerKey is the address a client is counted under.
func peerKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	return addrKey(p.Addr)
}
