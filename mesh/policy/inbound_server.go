package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Errors the Inbound and Outbound servers map to gRPC codes.
var (
	// ErrNotFound: the workload, service or port is unknown.
	ErrNotFound = errors.New("policy: not found")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("policy: invalid request")
)

// InboundServer serves io.linkerd.proxy.inbound.InboundServerPolicies:
// the policy of each port of each workload, from an Indexer. Every
// WatchPort stream of the same workload port shares one computed policy.
type InboundServer struct {
	inbound.UnimplementedInboundServerPoliciesServer
	x     *Indexer
	hub   *fanout[*inbound.Server]
	drain drainer
}

// drainer ends watch streams when the server shuts down.
type drainer struct {
	once sync.Once
	ch   chan struct{}
}

func newDrainer() drainer { return drainer{ch: make(chan struct{})} }

func (d *drainer) drain() { d.once.Do(func() { close(d.ch) }) }

// NewInboundServer returns a server reading from x. Register it on a
// grpc.Server; x.Run must be running for watches to see changes.
func NewInboundServer(x *Indexer) (*InboundServer, error) {
	if x == nil {
		return nil, errors.New("policy: nil indexer")
	}
	s := &InboundServer{x: x, drain: newDrainer()}
	s.hub = newFanout(inboundPolicy, func(a, b *inbound.Server) bool { return proto.Equal(a, b) })
	x.listen(s.hub.update)
	return s, nil
}

// Register adds the service to r.
func (s *InboundServer) Register(r grpc.ServiceRegistrar) {
	inbound.RegisterInboundServerPoliciesServer(r, s)
}

// Drain ends every open watch stream cleanly and makes new ones end at
// once, so that grpc.Server.GracefulStop can finish. Call it when
// shutting down; it is safe to call more than once.
func (s *InboundServer) Drain() { s.drain.drain() }

// ParseProxyWorkload reads the workload a proxy names in its requests
// (inbound PortSpec.workload, outbound TrafficSpec.source_workload):
// Linkerd's "<namespace>:<pod>" or its JSON form
// {"ns":"<namespace>","pod":"<pod>"}. It always names a pod; ParseKindName
// reads the "kind/name" references people write.
func ParseProxyWorkload(s string) (WorkloadRef, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var w struct {
			Namespace string `json:"ns"`
			Pod       string `json:"pod"`
			External  string `json:"external_workload"`
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&w); err != nil {
			return WorkloadRef{}, fmt.Errorf("%w: workload %q: %v", ErrInvalid, s, err)
		}
		if w.External != "" {
			return WorkloadRef{}, fmt.Errorf("%w: external workloads are not supported", ErrInvalid)
		}
		if w.Namespace == "" || w.Pod == "" {
			return WorkloadRef{}, fmt.Errorf("%w: workload %q needs ns and pod", ErrInvalid, s)
		}
		return WorkloadRef{Namespace: w.Namespace, Kind: "pod", Name: w.Pod}, nil
	}
	ns, pod, ok := strings.Cut(s, ":")
	if !ok || ns == "" || pod == "" || strings.Contains(pod, ":") {
		return WorkloadRef{}, fmt.Errorf("%w: workload %q: want <namespace>:<pod>", ErrInvalid, s)
	}
	return WorkloadRef{Namespace: ns, Kind: "pod", Name: pod}, nil
}

func portKey(ref WorkloadRef, port uint16) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d", ref.Namespace, ref.Kind, ref.Name, port)
}

func inboundPolicy(ix *Index, key string) (*inbound.Server, error) {
	parts := strings.Split(key, "\x00")
	var port uint16
	fmt.Sscan(parts[3], &port)
	ref := WorkloadRef{Namespace: parts[0], Kind: parts[1], Name: parts[2]}
	srv, ok := ix.Lookup(ref, port)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return authz.ToProto(srv), nil
}

func checkPortSpec(spec *inbound.PortSpec) (WorkloadRef, uint16, error) {
	ref, err := ParseProxyWorkload(spec.GetWorkload())
	if err != nil {
		return ref, 0, err
	}
	if spec.GetPort() == 0 || spec.GetPort() > 65535 {
		return ref, 0, fmt.Errorf("%w: port %d is out of range 1-65535", ErrInvalid, spec.GetPort())
	}
	return ref, uint16(spec.GetPort()), nil
}

// grpcError picks the gRPC code at the transport edge.
func grpcError(err error) error {
	switch {
	case errors.Is(err, ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// GetPort returns the current policy of a port.
func (s *InboundServer) GetPort(ctx context.Context, spec *inbound.PortSpec) (*inbound.Server, error) {
	ref, port, err := checkPortSpec(spec)
	if err != nil {
		return nil, grpcError(err)
	}
	v, err := inboundPolicy(s.x.Index(), portKey(ref, port))
	if err != nil {
		return nil, grpcError(err)
	}
	return v, nil
}

// WatchPort streams the policy of a port: the current one at once, then
// each change. A slow reader skips intermediate policies and gets the
// latest. The stream ends with NotFound if the workload goes away.
func (s *InboundServer) WatchPort(spec *inbound.PortSpec, stream grpc.ServerStreamingServer[inbound.Server]) error {
	ref, port, err := checkPortSpec(spec)
	if err != nil {
		return grpcError(err)
	}
	sub := s.hub.subscribe(portKey(ref, port))
	defer sub.close()
	s.x.cfg.Metrics.Streams.Add(1)
	defer s.x.cfg.Metrics.Streams.Add(-1)
	return serveWatch(stream.Context(), s.drain.ch, sub, func(v *inbound.Server) error { return stream.Send(v) })
}

func serveWatch[T any](ctx context.Context, drained <-chan struct{}, sub *subscription[T], send func(T) error) error {
	for {
		v, err, fresh := sub.latest()
		if fresh {
			if err != nil {
				return grpcError(err)
			}
			if err := send(v); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-drained:
			return nil
		case <-sub.wake:
		}
	}
}
