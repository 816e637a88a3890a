package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// OutboundPolicies is a dataplane.OutboundPolicies over the
// io.linkerd.proxy.outbound.OutboundPolicies/Watch stream.
type OutboundPolicies struct {
	client outbound.OutboundPoliciesClient
	policyStream
}

// OutboundOption tunes NewOutboundPolicies.
type OutboundOption func(*OutboundPolicies)

// WithOutboundBackoff sets the reconnection backoff after a broken stream:
// the first wait and the largest (defaults 100ms and 10s), each jittered
// between half and all of its value.
func WithOutboundBackoff(first, max time.Duration) OutboundOption {
	return func(o *OutboundPolicies) { o.minWait, o.maxWait = first, max }
}

// WithOutboundLogger sets the logger (default: discard).
func WithOutboundLogger(l *slog.Logger) OutboundOption {
	return func(o *OutboundPolicies) {
		if l != nil {
			o.log = l
		}
	}
}

// NewOutboundPolicies returns an outbound policy client that asks on
// behalf of workload (see Workload) over conn, which the caller keeps
// owning.
func NewOutboundPolicies(conn grpc.ClientConnInterface, workload string, opts ...OutboundOption) (*OutboundPolicies, error) {
	ps, err := newPolicyStream("outbound policy", conn, workload)
	if err != nil {
		return nil, err
	}
	o := &OutboundPolicies{client: outbound.NewOutboundPoliciesClient(conn), policyStream: ps}
	for _, opt := range opts {
		opt(o)
	}
	if err := o.checkBackoff("outbound policy"); err != nil {
		return nil, err
	}
	return o, nil
}

// TrafficSpec builds the request for target: an IP:port becomes an
// address target, anything else an authority.
func TrafficSpec(workload, target string) (*outbound.TrafficSpec, error) {
	if target == "" {
		return nil, errors.New("control: outbound policy target is empty")
	}
	spec := &outbound.TrafficSpec{SourceWorkload: workload}
	if ap, err := netip.ParseAddrPort(target); err == nil {
		if ap.Port() == 0 {
			return nil, fmt.Errorf("control: outbound policy target %q: port 0", target)
		}
		if ap.Addr().Zone() != "" {
			return nil, fmt.Errorf("control: outbound policy target %q: IP zones are not allowed", target)
		}
		spec.Target = &outbound.TrafficSpec_Addr{Addr: &pnet.TcpAddress{Ip: ipToProto(ap.Addr().Unmap()), Port: uint32(ap.Port())}}
		return spec, nil
	}
	spec.Target = &outbound.TrafficSpec_Authority{Authority: target}
	return spec, nil
}

// ipToProto packs an address as the proxy API carries it.
func ipToProto(a netip.Addr) *pnet.IPAddress {
	if a.Is4() {
		b := a.As4()
		return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])}}
	}
	b := a.As16()
	var hi, lo uint64
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv6{Ipv6: &pnet.IPv6{First: hi, Last: lo}}}
}

// Watch implements dataplane.OutboundPolicies. It returns once the first
// policy of target (an authority or IP:port) has arrived; NotFound is an
// error wrapping dataplane.ErrNotFound, any other failure of the first
// answer is returned as is. Afterwards the channel carries each new
// policy (the latest one when the reader is slow); when the stream
// breaks the last policy stays in force and the client reconnects with
// jittered backoff. The channel is closed when ctx ends, or early if a
// reconnection is answered NotFound (the target is gone).
func (o *OutboundPolicies) Watch(ctx context.Context, target string) (<-chan *outbound.OutboundPolicy, error) {
	spec, err := TrafficSpec(o.workload, target)
	if err != nil {
		return nil, err
	}
	return streamWatch[outbound.OutboundPolicy]{
		open: func(ctx context.Context) (grpc.ServerStreamingClient[outbound.OutboundPolicy], *outbound.OutboundPolicy, error) {
			return o.open(ctx, spec, target)
		},
		minWait: o.minWait, maxWait: o.maxWait, log: o.log,
		what: "outbound policy", attrs: []any{"target", target},
	}.start(ctx)
}

// replace puts v in the one-slot channel out, dropping a value the reader
// has not taken yet. It reports false when ctx ended first.
func replace[T any](ctx context.Context, out chan T, v T) bool {
	// A value the proxy has not read yet is stale: drop it.
	select {
	case <-out:
	default:
	}
	select {
	case out <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// open starts a Watch stream and reads its first message.
func (o *OutboundPolicies) open(ctx context.Context, spec *outbound.TrafficSpec, target string) (grpc.ServerStreamingClient[outbound.OutboundPolicy], *outbound.OutboundPolicy, error) {
	stream, err := o.client.Watch(ctx, spec)
	if err == nil {
		var first *outbound.OutboundPolicy
		if first, err = stream.Recv(); err == nil {
			return stream, first, nil
		}
	}
	if status.Code(err) == codes.NotFound {
		return nil, nil, fmt.Errorf("control: outbound policy for %s: %w: %s", target, dataplane.ErrNotFound, status.Convert(err).Message())
	}
	return nil, nil, fmt.Errorf("control: outbound policy for %s: %w", target, err)
}
