// Package dashboard is the live web view of a mesh: the topology
// (workloads as nodes, calls as edges coloured by success rate, mutual
// TLS identities, policy denials marked and explained), golden-metric
// charts per workload and route, the authorization table, the hottest
// paths and the live request stream from tap.
//
// A Dashboard reads a viz.Source: it scrapes every proxy each interval
// (WithInterval), computes the views over the last window (WithWindow)
// with package viz, and keeps a short history for the charts. When the
// source can tap (viz.TapSource) it keeps one tap open per proxy. Run
// drives it; Handler serves it. The library never opens a listener: the
// caller does (weft viz dashboard, weft demo --dashboard).
//
//	d, _ := dashboard.New(src, dashboard.WithExplainer(ex))
//	go d.Run(ctx)
//	http.Serve(listener, d.Handler())
//
// # What it trusts and what it caps
//
// The page and its script are embedded in the binary (go:embed) and load
// nothing from elsewhere; a Content-Security-Policy allows only the
// dashboard's own origin. The server is read-only: GET and HEAD only, no
// endpoint changes anything. Values from the mesh (paths, authorities,
// identities, labels) are inserted into the page as text, never as
// markup, since clients choose paths. The Host header must be an IP
// literal, "localhost" or a name given with WithAllowedHosts, which stops
// another web site from reading the dashboard through DNS rebinding. It
// does not authenticate anyone: whoever reaches its address sees the
// mesh's traffic, so bind it to loopback (the default of every command)
// or put an authenticating proxy in front. At most WithMaxRequests
// requests and WithMaxStreams live streams are served at once (503
// beyond); each stream lasts at most WithStreamLifetime; a slow browser
// loses tap events (counted) rather than slowing the taps or other
// browsers; /api/explain only explains denials the current view shows.
package dashboard
