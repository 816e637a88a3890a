package control

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/weftmesh/weft/mesh/dataplane"
)

// streamWatch is how the policy clients follow a server-streaming watch:
// the first message is read before Watch returns, later ones replace it in
// a one-slot channel, and a broken stream keeps the last value in force
// while it is reopened with jittered exponential backoff.
type streamWatch[T any] struct {
	// open starts the stream and reads its first message; an error
	// wrapping dataplane.ErrNotFound means the watched thing is gone.
	open             func(context.Context) (grpc.ServerStreamingClient[T], *T, error)
	minWait, maxWait time.Duration
	log              *slog.Logger
	// what names the watch in log lines, with its attributes.
	what  string
	attrs []any
}

// start opens the stream and returns the channel; see the type's comment.
// The channel is closed when ctx ends, or early when a reconnection is
// answered NotFound.
func (w streamWatch[T]) start(ctx context.Context) (<-chan *T, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, first, err := w.open(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan *T, 1)
	out <- first
	go func() {
		defer cancel()
		defer close(out)
		wait := w.minWait
		for {
			for {
				msg, err := stream.Recv()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					w.log.Warn(w.what+" stream broken, keeping last policy", append(w.attrs, "err", err)...)
					break
				}
				wait = w.minWait
				if !replace(ctx, out, msg) {
					return
				}
			}
			for {
				select {
				case <-time.After(jitter(wait)):
				case <-ctx.Done():
					return
				}
				wait = min(2*wait, w.maxWait)
				var first *T
				stream, first, err = w.open(sctx)
				if err == nil {
					if !replace(ctx, out, first) {
						return
					}
					break
				}
				if errors.Is(err, dataplane.ErrNotFound) {
					w.log.Warn(w.what+" gone", w.attrs...)
					return
				}
				if ctx.Err() != nil {
					return
				}
				w.log.Debug(w.what+" reconnect failed", append(w.attrs, "err", err)...)
			}
		}
	}()
	return out, nil
}
