package discovery

import (
	"maps"
	"net/netip"
	"reflect"
	"sync"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	pbnet "github.com/weftmesh/weft/apis/proxy/net"
	"google.golang.org/grpc"
)

// maxAddrsPerUpdate bounds the addresses in one Update message so that a
// large service never produces a message near gRPC's default 4 MiB limit.
const maxAddrsPerUpdate = 1000

// EndpointSnapshot is one published version of a destination's endpoint
// set. Snapshots are immutable and shared by every subscriber of a topic;
// the proxy API messages that bring a subscriber from the previous version
// to this one, or from nothing to this one, are built once, on first use,
// and reused by every subscriber.
type EndpointSnapshot struct {
	// Set is the endpoint set.
	Set EndpointSet
	// Version counts the topic's snapshots from 1.
	Version uint64

	prevOnce sync.Once
	prev     *EndpointSet
	delta    *batch

	fullOnce sync.Once
	full     batch
}

// batch is a list of messages built once and shared by every subscriber
// that needs it, with their wire encoding prepared once too.
type batch struct {
	msgs   []*pb.Update
	oneOff bool // built for one subscriber: not worth encoding ahead

	prepOnce sync.Once
	prepared []any
}

func newBatch(msgs []*pb.Update) *batch { return &batch{msgs: msgs} }

// sendable returns the messages as values for ServerStream.SendMsg:
// encoded once (with the first stream's codec) when encode is true and
// that works, plain messages otherwise.
func (b *batch) sendable(stream grpc.ServerStream, encode bool) []any {
	if !encode || b.oneOff {
		return plain(b.msgs)
	}
	b.prepOnce.Do(func() {
		out := make([]any, len(b.msgs))
		for i, m := range b.msgs {
			pm := &grpc.PreparedMsg{}
			if err := pm.Encode(stream, m); err != nil {
				return // leave prepared nil: send plain messages
			}
			out[i] = pm
		}
		b.prepared = out
	})
	if b.prepared == nil {
		return plain(b.msgs)
	}
	return b.prepared
}

func plain(msgs []*pb.Update) []any {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}

// NextEndpointSnapshot returns the snapshot that follows prev (nil for the
// first) with set, and whether it differs from prev. When it does not,
// prev is returned.
func NextEndpointSnapshot(prev *EndpointSnapshot, set EndpointSet) (*EndpointSnapshot, bool) {
	if !set.Exists {
		set = EndpointSet{}
	}
	if prev == nil {
		return &EndpointSnapshot{Set: set, Version: 1}, true
	}
	if prev.Set.Equal(set) {
		return prev, false
	}
	p := prev.Set
	return &EndpointSnapshot{Set: set, Version: prev.Version + 1, prev: &p}, true
}

// updatesSince returns the messages that bring a subscriber that last saw
// last (nil: nothing yet) to s. The initial messages and the delta from
// the previous version are shared; other jumps (a subscriber that fell
// behind by several versions) are computed for the caller alone.
func (s *EndpointSnapshot) updatesSince(last *EndpointSnapshot) *batch {
	switch {
	case last == s:
		return nil
	case last == nil:
		s.fullOnce.Do(func() { s.full.msgs = updatesBetween(nil, s.Set) })
		return &s.full
	case s.Version == last.Version+1 && s.Version > 1:
		s.prevOnce.Do(func() {
			s.delta = newBatch(updatesBetween(s.prev, s.Set))
			s.prev = nil
		})
		return s.delta
	default:
		return &batch{msgs: updatesBetween(&last.Set, s.Set), oneOff: true}
	}
}

// updatesBetween computes the Destination.Get messages that take a client
// holding prev (nil: a new subscription) to cur, following the contract of
// the proxy API: the first message of a subscription is sent at once;
// no_endpoints{exists:false} for an unknown destination,
// no_endpoints{exists:true} only when it exists without endpoints, and
// add/remove deltas afterwards (adds first, so a client never sees an
// empty set in between).
func updatesBetween(prev *EndpointSet, cur EndpointSet) []*pb.Update {
	if !cur.Exists {
		if prev != nil && !prev.Exists {
			return nil
		}
		return []*pb.Update{noEndpoints(false)}
	}
	if prev == nil || !prev.Exists {
		if len(cur.Endpoints) == 0 {
			return []*pb.Update{noEndpoints(true)}
		}
		return addUpdates(cur.Endpoints, cur.MetricLabels)
	}
	if len(cur.Endpoints) == 0 && len(prev.Endpoints) == 0 {
		return nil
	}
	var added []Endpoint
	var removed []netip.AddrPort
	// Set-level labels travel with adds: when they change, resend all.
	resendAll := !maps.Equal(prev.MetricLabels, cur.MetricLabels)
	i, j := 0, 0
	for i < len(prev.Endpoints) || j < len(cur.Endpoints) {
		switch {
		case j == len(cur.Endpoints) || (i < len(prev.Endpoints) && prev.Endpoints[i].Addr.Compare(cur.Endpoints[j].Addr) < 0):
			removed = append(removed, prev.Endpoints[i].Addr)
			i++
		case i == len(prev.Endpoints) || prev.Endpoints[i].Addr.Compare(cur.Endpoints[j].Addr) > 0:
			added = append(added, cur.Endpoints[j])
			j++
		default:
			if !prev.Endpoints[i].Equal(cur.Endpoints[j]) {
				added = append(added, cur.Endpoints[j])
			}
			i++
			j++
		}
	}
	if resendAll {
		added = cur.Endpoints
	}
	out := addUpdates(added, cur.MetricLabels)
	for len(removed) > 0 {
		n := min(len(removed), maxAddrsPerUpdate)
		addrs := make([]*pbnet.TcpAddress, n)
		for k := range n {
			addrs[k] = TCPAddressToProto(removed[k])
		}
		out = append(out, &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: addrs}}})
		removed = removed[n:]
	}
	return out
}

func addUpdates(eps []Endpoint, labels map[string]string) []*pb.Update {
	var out []*pb.Update
	for len(eps) > 0 {
		n := min(len(eps), maxAddrsPerUpdate)
		addrs := make([]*pb.WeightedAddr, n)
		for k := range n {
			addrs[k] = EndpointToProto(eps[k])
		}
		out = append(out, &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: addrs, MetricLabels: labels}}})
		eps = eps[n:]
	}
	return out
}

func noEndpoints(exists bool) *pb.Update {
	return &pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: exists}}}
}

// ProfileSnapshot is one published version of a destination's profile,
// shared by every subscriber; its message is built once.
type ProfileSnapshot struct {
	// Profile is the profile.
	Profile Profile

	once sync.Once
	msg  *pb.DestinationProfile

	prepOnce sync.Once
	prepared *grpc.PreparedMsg
}

// NextProfileSnapshot returns a snapshot for p, or prev and false when p
// equals prev's profile.
func NextProfileSnapshot(prev *ProfileSnapshot, p Profile) (*ProfileSnapshot, bool) {
	if prev != nil && reflect.DeepEqual(prev.Profile, p) {
		return prev, false
	}
	return &ProfileSnapshot{Profile: p}, true
}

func (s *ProfileSnapshot) message() *pb.DestinationProfile {
	s.once.Do(func() { s.msg = ProfileToProto(s.Profile) })
	return s.msg
}

// sendable returns the profile message for ServerStream.SendMsg, encoded
// once when encode is true and that works.
func (s *ProfileSnapshot) sendable(stream grpc.ServerStream, encode bool) any {
	m := s.message()
	if !encode {
		return m
	}
	s.prepOnce.Do(func() {
		pm := &grpc.PreparedMsg{}
		if err := pm.Encode(stream, m); err == nil {
			s.prepared = pm
		}
	})
	if s.prepared == nil {
		return m
	}
	return s.prepared
}
