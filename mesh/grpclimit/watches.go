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
type Watches struct {
	max, perPeer int

	mu    sync.Mutex
	total int
	peers map[string]int

	refused atomic.Uint64
}

// NewWatches returns a limiter of max watches in total and perPeer per
// peer address. A value of zero or less means no limit of that kind.
func NewWatches(max, perPeer int) *Watches {
	return &Watches{max: max, perPeer: perPeer, peers: map[string]int{}}
}

// InUse returns the number of watches open now.
func (w *Watches) InUse() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

// Refused returns how many watches were refused since the start.
func (w *Watches) Refused() uint64 { return w.refused.Load() }

// StreamServerInterceptor counts every streaming RPC while its handler
// runs. Install it with grpc.ChainStreamInterceptor; [NewServer] does.
func (w *Watches) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		release, err := w.acquire(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		defer release()
		return handler(srv, ss)
	}
}

func (w *Watches) acquire(ctx context.Context, method string) (func(), error) {
	key := peerKey(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.max > 0 && w.total >= w.max {
		w.refused.Add(1)
		return nil, status.Errorf(codes.ResourceExhausted,
			"grpclimit: %s refused: the server holds its maximum of %d watches; retry later or against another replica", method, w.max)
	}
	if w.perPeer > 0 && w.peers[key] >= w.perPeer {
		w.refused.Add(1)
		return nil, status.Errorf(codes.ResourceExhausted,
			"grpclimit: %s refused: peer %s holds its maximum of %d watches", method, key, w.perPeer)
	}
	w.total++
	w.peers[key]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.total--
		if w.peers[key]--; w.peers[key] <= 0 {
			delete(w.peers, key)
		}
	}, nil
}

// peerKey is the address a client is counted under.
func peerKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	return addrKey(p.Addr)
}
