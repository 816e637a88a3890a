// Package grpclimit is the one server setup of Weft's control-plane gRPC
// services (identity, destination, policy): what a single client may hold
// on them, so that no client, hostile or broken, can exhaust a controller.
//
// The library never owns listeners: [NewServer] returns a grpc.Server
// configured with [Limits], on which the caller registers services (for
// example discovery.Server.Register) and which it serves on its own
// listener. `weft-controller identity|destination|policy` and the local
// mesh (mesh/local) all build their servers with it, from the same flags.
//
//	srv, err := grpclimit.NewServer(grpclimit.Defaults(), grpc.Creds(creds))
//	dst.Register(srv)
//	err = srv.Serve(lis)
//
// # What is limited
//
//   - The handshake: a connection must finish TLS (when served) and the
//     HTTP/2 preface within ConnectionTimeout, or it is closed. A socket
//     that connects and sends nothing is closed after it.
//   - Connections: at most MaxConnections open at once, and
//     MaxConnectionsPerPeer from one client IP address. [Server.Serve]
//     applies them to the listener it is given: a connection beyond a cap
//     is closed as soon as it is accepted, before TLS or HTTP/2 start, and
//     counted. [Connections] does it for any listener (the injector's
//     HTTPS server uses it too).
//   - Keepalive: clients may ping at most every KeepaliveMinTime (faster
//     pingers get GOAWAY "too_many_pings"); the server pings a silent
//     connection after KeepaliveTime and closes it when no answer comes
//     within KeepaliveTimeout; a connection with no RPC for
//     MaxConnectionIdle is closed with GOAWAY.
//   - Per connection: at most MaxStreamsPerConnection concurrent RPCs
//     (the HTTP/2 MAX_CONCURRENT_STREAMS setting) and request messages of
//     at most MaxRecvMsgSize bytes (RESOURCE_EXHAUSTED beyond).
//   - Watches: every streaming RPC (Destination.Get and GetProfile,
//     InboundServerPolicies.WatchPort, OutboundPolicies.Watch, and also
//     gRPC health Watch and reflection) counts against MaxWatches in total
//     and MaxWatchesPerPeer per client IP address. Beyond either, a new
//     stream ends at once with RESOURCE_EXHAUSTED and a message naming the
//     limit; open streams keep working. [Watches] is the stream
//     interceptor doing it, usable alone on a server built otherwise.
//   - Unary deadline: every unary RPC (Identity.Certify,
//     InboundServerPolicies.GetPort, OutboundPolicies.Get, health Check)
//     gets RequestTimeout from the moment its headers arrive, so a client
//     that sends half a request, or never ends it, is answered
//     DEADLINE_EXCEEDED instead of holding the stream. A shorter deadline
//     sent by the client (grpc-timeout) wins.
//   - Requests in flight: those unary RPCs count, from their headers to
//     their end, against MaxRequests in total and MaxRequestsPerPeer per
//     client IP address; beyond either, a new one is answered
//     RESOURCE_EXHAUSTED before its request is read. Together with the
//     deadline this bounds what stalled requests one client can hold.
//
// The defaults ([Defaults]) and the reasoning behind each are in
// docs/limits.md.
package grpclimit
