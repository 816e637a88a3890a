package l4

import (
	"net"

	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
)

// pipe copies in both directions between client and server
// (internal/relay) and returns at once; the direction that finishes last
// closes both connections and calls done.
//
// tracked is the accepted connection the proxy tracks for its drain: a
// forced close of it (closeAll) ends both directions, parked or not. src
// are the series of the client connection (bytes from client count as
// read, bytes to it as written), dst those of the server connection (nil
// when it is not counted); errors are recorded on the side they came from.
func (p *Paths) pipe(tracked, client, server net.Conn, src, dst *connmetrics.Conn, done func()) {
	e := relay.Ends{Client: client, Server: server, ToClient: src.WrittenBytes, ToServer: src.ReadBytes, ClientStats: src}
	if dst != nil {
		e.ToClient, e.ToServer = connmetrics.Both{A: src.WrittenBytes, B: dst.ReadBytes}, connmetrics.Both{A: src.ReadBytes, B: dst.WrittenBytes}
		e.ServerStats = dst
	}
	ps := relay.NewPipe(p.idle.Load(), p.idleLinger, e, done)
	if !p.piped(tracked, ps) {
		// The proxy closed everything before the pipe was known to it.
		ps.Close()
	}
	ps.Start()
}
