package control

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/discovery/model"
)

// Profiles is a dataplane.Profiles over the discovery client's
// WatchProfile (Destination.GetProfile).
type Profiles struct {
	c *client.Client
}

// NewProfiles wraps a discovery client. The caller keeps owning c and
// closes it.
func NewProfiles(c *client.Client) (*Profiles, error) {
	if c == nil {
		return nil, errors.New("control: discovery client is nil")
	}
	return &Profiles{c: c}, nil
}

// Watch implements dataplane.Profiles: it waits for discovery's first
// answer (or the end of ctx), then streams each new profile until ctx
// ends; while the stream is broken the discovery client keeps the last
// profile and reconnects, so nothing is sent in between.
//
// Discovery answers every in-cluster name, with a default profile when
// there is no Service and no endpoint behind it. Both that and a name
// discovery refuses to serve (InvalidArgument: outside the cluster
// domain, not a service name) are errors wrapping dataplane.ErrNotFound:
// there is no profile, and the proxy routes by outbound policy alone.
func (p *Profiles) Watch(ctx context.Context, target string) (<-chan *pdst.DestinationProfile, error) {
	w, err := p.c.WatchProfile(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("control: profile of %s: %w", target, err)
	}
	if err := w.Wait(ctx); err != nil {
		w.Close()
		if status.Code(err) == codes.InvalidArgument {
			return nil, fmt.Errorf("control: profile of %s: %w: %w", target, dataplane.ErrNotFound, err)
		}
		return nil, fmt.Errorf("control: profile of %s: %w", target, err)
	}
	prof, _ := w.Profile()
	if !known(prof) {
		w.Close()
		return nil, fmt.Errorf("control: profile of %s: %w: no Service or endpoint", target, dataplane.ErrNotFound)
	}
	last := model.ProfileToProto(prof)
	out := make(chan *pdst.DestinationProfile, 1)
	out <- last
	go follow(ctx, w, out, func() (*pdst.DestinationProfile, bool) {
		prof, ok := w.Profile()
		if !ok {
			return nil, false
		}
		// Updated also fires when the stream breaks or recovers with the
		// same profile; send only changes.
		msg := model.ProfileToProto(prof)
		if proto.Equal(msg, last) {
			return nil, false
		}
		last = msg
		return msg, true
	})
	return out, nil
}

// known reports whether a profile is about something discovery knows: a
// Service, a single endpoint, or a ServiceProfile.
func known(p model.Profile) bool {
	return p.Service != nil || p.Endpoint != nil || p.Source != "" || len(p.Routes) > 0 || len(p.DstOverrides) > 0
}
