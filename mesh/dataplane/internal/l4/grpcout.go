package l4

import (
	"context"
	"errors"
	"net/netip"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2server"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	outboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
)

// The outbound frame path's wiring: the client proxy's HTTP/2
// connections from the application serve the gRPC calls
// outbound.AcceptGRPC takes with outbound.ServeFrames, which sends them
// with toEndpointFields over the same HTTP/2 pool as toEndpoint.

// grpcOutStreams is the frame path of the application's gRPC calls (the
// outbound direction); before is a test hook (nil).
func (p *Paths) grpcOutStreams(before func()) *h2server.StreamHandler {
	return &h2server.StreamHandler{
		Accept: outboundhttp.AcceptGRPC,
		Serve: func(st *h2server.Stream) {
			if before != nil {
				before()
			}
			info := infoOf(st.Context())
			p.out.ServeFrames(st, &info.Conn.Conn, info.svc)
		},
	}
}

// toEndpointFields is toEndpoint for a frame-path call (the outbound
// HTTP.RoundTripFields): an HTTP/2 request, so over the pooled HTTP/2
// connection to the endpoint's proxy (mesh TLS) or h2c to an unmeshed
// endpoint. As there, a call the upstream refused unprocessed is sent
// once more on another connection while body (the kept body, nil when
// none is kept) can be replayed; unlike there, only with a kept body,
// read again from its start (h2client may have read from the first
// reader, and closes it on failure).
func (rt *httpRuntime) toEndpointFields(ctx context.Context, req httpcore.FieldRequest, ep endpoint.Endpoint, body *outboundhttp.ReplayBody) (httpcore.FieldResponse, error) {
	key := upstream.Key{Addr: ep.Addr}
	if ep.Identity != "" {
		dial := ep.Addr
		if ep.OpaqueTransportPort != 0 {
			dial = netip.AddrPortFrom(ep.Addr.Addr(), ep.OpaqueTransportPort)
		}
		key = upstream.Key{Addr: dial, Identity: ep.Identity, Port: ep.Addr.Port()}
	}
	for try := 0; ; try++ {
		resp, err := rt.pool.RoundTripFields(ctx, key, &h2client.FieldRequest{Method: req.Method, Scheme: "http",
			Authority: req.Authority, Path: req.Path, Fields: req.Fields, Body: req.Body}, upstream.Labels{Endpoint: ep})
		if err != nil {
			if try == 0 && errors.Is(err, h2client.ErrUnprocessed) && body != nil && body.Replayable() {
				req.Body = body.Again()
				continue
			}
			return httpcore.FieldResponse{}, err
		}
		return httpcore.FieldResponse{Status: resp.Status, Fields: resp.Fields, Body: resp.Body, Trailers: resp}, nil
	}
}
