// Package authz is Weft's inbound authorization core: the policy of one
// port ([Server]) and the pure evaluator that decides whether a client may
// connect or send a request, and explains why.
//
// It is what both halves of the mesh share. The policy controller
// (mesh/policy) translates Kubernetes objects into one Server per workload
// port, serves it to proxies with [ToProto], and evaluates it offline for
// `weft policy test`. The proxy receives the same message, converts it
// back with [FromProto] (which refuses anything it does not fully
// understand), and calls [Evaluate] on every connection and request. The
// package imports no Kubernetes code, only the generated proxy API and
// package pathnorm.
//
// # Evaluating
//
//	srv, err := authz.FromProto(msg)          // once per policy update
//	res := authz.Evaluate(srv, authz.Conn{IP: peer, TLS: true, Identity: id}, nil)
//	if res.Decision == authz.Deny { close the connection }
//
//	res = authz.Evaluate(srv, conn, &authz.Request{Method: r.Method, Path: r.RequestURI, Host: r.Host, Header: r.Header})
//	// res.Decision: Allow, Deny or Audit; res.Reason: why (a stable class
//	// name for a response header); res.Path: the normalized path to forward.
//
// Evaluate does not allocate for connections, nor for requests whose path
// is already normalized and whose routes do not match on query
// parameters. [Explain] runs the same code and records each step, for
// people ("why was I denied?").
//
// # Semantics
//
// They follow Linkerd's proxy. An authorization admits a client when the
// client's address is in one of its networks (and none of their
// exceptions) and the client satisfies its authentication: any client
// (Unauthenticated), any client over mesh TLS (TLSUnauthenticated), or a
// client whose verified identity is listed or ends with a listed suffix
// (TLSAuthenticated). A connection, or a request on an opaque or TLS
// port, is allowed when one of the server's authorizations admits it. A
// request on an HTTP port is matched to the most specific route by the
// matcher and precedence the outbound router shares (package
// mesh/internal/routematch: host, then path match length, then for gRPC
// service and method, then method, number of header and query matches,
// then route order); no route means Deny with ReasonNoRoute. It is then
// allowed when an authorization of that route or of the server admits the
// client. Authorizations marked Audit (the "audit" default policy or
// access policy) are tried after every other one, and turn a deny into
// Audit: the traffic goes through and is reported.
//
// A server with no authorizations denies everything. Paths are normalized
// with package pathnorm before matching; a path it refuses is denied with
// ReasonInvalidPath. When a header or query parameter that a route
// matches on arrives several times (or as a comma-separated list) and its
// values disagree about the match, the request is denied with
// ReasonAmbiguousRequest, so a repeated header cannot pick a more
// permissive route than the application would act on.
package authz
