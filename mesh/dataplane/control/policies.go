package control

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// Policies is a dataplane.InboundPolicies over the
// io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort stream.
type Policies struct {
	client inbound.InboundServerPoliciesClient
	policyStream
}

// policyStream is what the inbound and outbound policy clients share: the
// workload they ask for and how they reconnect a broken stream.
type policyStream struct {
	workload string
	minWait  time.Duration
	maxWait  time.Duration
	log      *slog.Logger
}

// newPolicyStream checks conn and workload and returns the defaults;
// what names the client in errors ("policy", "outbound policy").
func newPolicyStream(what string, conn grpc.ClientConnInterface, workload string) (policyStream, error) {
	if conn == nil {
		return policyStream{}, fmt.Errorf("control: %s connection is nil", what)
	}
	if workload == "" {
		return policyStream{}, fmt.Errorf("control: %s workload is empty", what)
	}
	return policyStream{workload: workload, minWait: 100 * time.Millisecond, maxWait: 10 * time.Second, log: slog.New(slog.DiscardHandler)}, nil
}

// checkBackoff reports a backoff the options set out of order.
func (s *policyStream) checkBackoff(what string) error {
	if s.minWait <= 0 || s.maxWait < s.minWait {
		return fmt.Errorf("control: %s backoff %s..%s: want 0 < first <= max", what, s.minWait, s.maxWait)
	}
	return nil
}

// PoliciesOption tunes NewPolicies.
type PoliciesOption func(*Policies)

// WithPolicyBackoff sets the reconnection backoff after a broken stream:
// the first wait and the largest (defaults 100ms and 10s), each jittered
// between half and all of its value.
func WithPolicyBackoff(first, max time.Duration) PoliciesOption {
	return func(p *Policies) { p.minWait, p.maxWait = first, max }
}

// WithPolicyLogger sets the logger (default: discard).
func WithPolicyLogger(l *slog.Logger) PoliciesOption {
	return func(p *Policies) {
		if l != nil {
			p.log = l
		}
	}
}

// Workload formats a workload the way Linkerd's proxies send it in a
// PortSpec: {"ns":"shop","pod":"web-1"}.
func Workload(namespace, pod string) string {
	b, _ := json.Marshal(struct {
		NS  string `json:"ns"`
		Pod string `json:"pod"`
	}{namespace, pod})
	return string(b)
}

// NewPolicies returns an inbound policy client for workload (see Workload)
// over conn, which the caller keeps owning.
func NewPolicies(conn grpc.ClientConnInterface, workload string, opts ...PoliciesOption) (*Policies, error) {
	ps, err := newPolicyStream("policy", conn, workload)
	if err != nil {
		return nil, err
	}
	p := &Policies{client: inbound.NewInboundServerPoliciesClient(conn), policyStream: ps}
	for _, o := range opts {
		o(p)
	}
	if err := p.checkBackoff("policy"); err != nil {
		return nil, err
	}
	return p, nil
}

// Watch implements dataplane.InboundPolicies. It returns once the first
// policy of port has arrived; NotFound is an error wrapping
// dataplane.ErrNotFound, any other failure of the first answer is returned
// as is. Afterwards the channel carries each new policy (the latest one
// when the reader is slow) and stays open across reconnections until ctx
// ends; it is closed early only if the server later says NotFound.
func (p *Policies) Watch(ctx context.Context, port uint32) (<-chan *inbound.Server, error) {
	if port == 0 || port > 65535 {
		return nil, fmt.Errorf("control: policy for port %d: port out of range", port)
	}
	return streamWatch[inbound.Server]{
		open: func(ctx context.Context) (grpc.ServerStreamingClient[inbound.Server], *inbound.Server, error) {
			return p.open(ctx, port)
		},
		minWait: p.minWait, maxWait: p.maxWait, log: p.log,
		what: "inbound policy", attrs: []any{"port", port},
	}.start(ctx)
}

// open starts a WatchPort stream and reads its first message.
func (p *Policies) open(ctx context.Context, port uint32) (grpc.ServerStreamingClient[inbound.Server], *inbound.Server, error) {
	stream, err := p.client.WatchPort(ctx, &inbound.PortSpec{Workload: p.workload, Port: port})
	if err == nil {
		var first *inbound.Server
		if first, err = stream.Recv(); err == nil {
			return stream, first, nil
		}
	}
	if status.Code(err) == codes.NotFound {
		return nil, nil, fmt.Errorf("control: policy for %s port %d: %w: %s", p.workload, port, dataplane.ErrNotFound, status.Convert(err).Message())
	}
	return nil, nil, fmt.Errorf("control: policy for %s port %d: %w", p.workload, port, err)
}

// jitter returns a duration between d/2 and d.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
