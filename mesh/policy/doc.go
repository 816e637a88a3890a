// Package policy is Weft's authorization control plane: it reads
// Linkerd's policy resources (and the workloads they select), builds an
// index of the policy of every workload port, evaluates it offline with
// explanations, and serves it to proxies over Linkerd's Inbound and
// Outbound policy APIs.
//
// # The pieces
//
//	Source (static files, Kubernetes informers, MemorySource)
//	   │  Objects: Namespaces, workloads, ServiceAccounts, Services,
//	   │  Servers, ServerAuthorizations, AuthorizationPolicies,
//	   │  MeshTLS/NetworkAuthentications, HTTPRoutes, GRPCRoutes,
//	   │  TCPRoutes, TLSRoutes, HTTPLocalRateLimitPolicies, EgressNetworks
//	   ▼
//	Build(objs, cfg) ─► Index ─► Evaluate / Explain        (offline, CI)
//	   ▲                  │
//	Indexer.Run (rebuilds on change)
//	                      ├─► InboundServer  io.linkerd.proxy.inbound
//	                      └─► OutboundServer io.linkerd.proxy.outbound
//
// Build is a pure function: it translates the objects once, reports
// invalid ones (SeverityError, ignored as Linkerd ignores them) and lints
// (SeverityWarning: a Server port no container declares, a reference to a
// missing object, a Server selecting no pod, overlapping Servers) as
// Problems, and never fails. The result for each port is an authz.Server,
// the same value the Inbound API sends (authz.ToProto) and the proxy
// evaluates (authz.FromProto, authz.Evaluate), so offline answers and
// proxy decisions cannot drift apart.
//
// # Offline evaluation
//
//	objs, _ := manifest.LoadPaths("deploy/")           // strict decoding
//	o, _ := policy.ObjectsFromManifests(objs)
//	cfg, _ := policy.NewConfig(policy.WithDefaultPolicy("deny"))
//	ix := policy.Build(o, cfg)
//	e, _ := ix.Explain(policy.Request{
//		Workload: policy.WorkloadRef{Namespace: "shop", Kind: "deployment", Name: "api"},
//		Port:     intstr.FromString("http"),
//		Client:   policy.Client{ServiceAccount: "web", Namespace: "shop"},
//		HTTP:     &authz.Request{Method: "GET", Path: "/items"},
//	})
//	fmt.Print(e) // decision: allow (authorized), then each step
//
// LoadCases and RunCases run a cases file (the `weft policy test`
// format); package policytest wraps them for `go test`.
//
// # Semantics
//
// They are Linkerd's for the same YAML; docs/policy.md has the details.
// A port no Server selects gets the default policy (pod annotation
// config.linkerd.io/default-inbound-policy, else the namespace's, else the
// cluster's), with kubelet probe paths authorized from the probe networks.
// A selected port gets the Server's ServerAuthorizations and
// AuthorizationPolicies (targeting the Server or its Namespace) and its
// accessPolicy; with none of them every client is denied. HTTPRoutes and
// GRPCRoutes attached to the Server replace the default route (and with
// it the automatic probe authorization); policies targeting a route add
// to the server's for that route. A reference to a missing or invalid
// authentication makes the policy grant nothing; an empty list of
// requirements is refused rather than read as "everyone". The oldest
// HTTPLocalRateLimitPolicy targeting a Server gives its HTTP ports a rate
// limit (authz.Server.RateLimit), which explanations show for admitted
// requests.
//
// On the outbound side, an address that is no Service's gets the policy
// of the EgressNetwork that covers it (one in the client's namespace,
// else in Config.GlobalEgressNamespace; Index.EgressNetworkFor says which),
// with the routes attached to it and a default route that forwards
// (Allow) or refuses (Deny) the rest; without one, Linkerd's
// egress-fallback policy, which forwards everything.
//
// A route (of any kind) whose parent is a Service in another namespace is
// a consumer route: it is served, merged with the Service's own routes,
// only to clients of the route's namespace, which is what the client's
// proxy says in its request (OutboundTarget.SourceNamespace).
//
// Gateway API TCPRoutes and TLSRoutes whose parent is a Service (or an
// EgressNetwork in the route's namespace) route whole connections: a
// port with TLSRoutes and no HTTP or gRPC route is served as
// ProxyProtocol.Tls (routes chosen by the ClientHello's SNI), one with a
// TCPRoute as ProxyProtocol.Opaque (Linkerd serves the oldest TCPRoute
// only); each route's backends are weighted, and one the controller cannot
// resolve carries an Invalid filter (outbound_streamroute.go).
//
// # Serving
//
// NewIndexer builds the first index from a Source; its Run method
// rebuilds after every change. NewInboundServer and NewOutboundServer
// register with a grpc.Server the caller owns. Every watch of the same
// workload port (or Service port, unless the client's namespace has
// consumer routes for the Service) shares one computed policy; a new
// watcher gets the current one at once; a slow watcher skips to the
// latest. Drain ends the watch streams so GracefulStop can finish.
//
// # Metrics and logs
//
// WithMetrics takes a Metrics of go-kit instruments: a Histogram of index
// build durations in seconds and a Gauge of open watch streams; nil fields
// record nothing. NewPrometheusMetrics registers them as
// weft_policy_index_rebuild_seconds and weft_policy_watch_streams.
// WithLogger takes a *slog.Logger; problems found while indexing are
// logged at info level.
package policy
