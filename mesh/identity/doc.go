// Package identity is the root of the mesh's security: it turns a
// workload's proof of who it is (a service-account token) into a
// short-lived certificate, and gives proxies what they need to check each
// other's certificates.
//
// # Names
//
// A workload identity is a Name: a Kubernetes service account in a
// namespace, inside an installation's Domain (control-plane namespace and
// trust domain). Its text form is Linkerd's,
//
//	web.shop.serviceaccount.identity.weft.cluster.local
//
// and it is the only DNS SAN of every workload certificate. ParseName,
// Domain.Name and Domain.ParseSPIFFE build names; Name.SPIFFEID formats the
// spiffe://cluster.local/ns/shop/sa/web form.
//
// # Trust
//
// A Bundle is a set of trust anchors; a chain is trusted when it leads to
// any of them, which is how anchors rotate (publish old and new, move
// issuers, drop old). NewBundleFile follows a PEM file and swaps in a new
// bundle when it changes. VerifyPeerChain is the one place a peer's chain
// is judged, by the identity client's TLS hooks and by the data plane
// alike (VerifyPeer is the same rule on DER): chain to the roots for the
// right extended key usage, listed by the leaf, no CA leaf, exactly one
// DNS SAN that parses as a Name, no other SANs (a SPIFFE URI SAN
// included).
//
// # Issuing
//
// Service implements io.linkerd.proxy.identity.Identity/Certify. For each
// request it
//
//  1. parses the requested name and the CSR (DER as Linkerd's proxy sends
//     it, or PEM; at most MaxCSRSize bytes),
//  2. checks the token's shape with CheckToken (not empty, at most
//     MaxTokenSize) and asks its Authenticator who the token belongs to,
//  3. charges the call to that identity's token bucket (WithRateLimit,
//     DefaultRateLimit: 1,000 at once, then 10 per second; ErrRateLimited
//     beyond) and requires that identity to equal the requested one,
//  4. checks the CSR with CheckCSR (signature; ECDSA P-256/P-384 or
//     Ed25519; exactly one DNS SAN equal to the name; no IP, email or URI
//     SAN; no CA request),
//  5. has its Issuer sign a leaf valid for the configured lifetime (24h),
//     backdated by the clock-skew allowance (20s), and checks the answer.
//
// The whole call runs under WithRequestTimeout (DefaultRequestTimeout,
// 10s); over gRPC the deadline starts when the call reaches the handler,
// so it bounds the receipt of the request too.
//
// Every refusal wraps a sentinel error (ErrUnauthenticated,
// ErrIdentityMismatch, ErrInvalidCSR, ErrInvalidName, ErrRateLimited,
// ErrUnavailable); Register maps them to gRPC codes at the edge (see
// Code). Nothing is issued on any error.
//
// Register serves Certify on a grpc.Server the caller owns (what
// weft-controller does). Handler serves the same method as an
// http.Handler for Go's HTTP/2 server, without grpc-go, with grpc-go's
// answers status for status; it costs the server more CPU per call than
// grpc-go's transport (docs/benchmarks.md), so it is for embedders whose
// port is already a net/http server.
//
// Authenticator is the one token checker; every implementation applies
// CheckToken first and passes identitytest.RunAuthenticator's table.
// Authenticators: Tokens (in memory), static.Tokens (a YAML token file),
// kubernetes.Authenticator (TokenReview, audience checked, fail closed).
// Issuers: CA (a key pair in memory; LeafTemplate is its pure core),
// localca.Issuer (a key pair from a directory, reloaded on change),
// kubernetes.SecretIssuer (the same, following a Secret),
// smallstep.Issuer (a step-ca authority). The client subpackage is the
// proxy side: it generates its key, requests and renews its certificate
// and provides tls.Config hooks and gRPC credentials.
//
// # Metrics
//
// Metrics are go-kit interfaces (DiscardMetrics by default);
// NewPrometheusMetrics registers
//
//	weft_identity_certify_requests_total{result}   Certify calls by result
//	weft_identity_certify_duration_seconds         Certify latency
//	weft_identity_issuer_expiry_timestamp_seconds  issuer NotAfter (Unix s)
//	weft_identity_issuer_reloads_total{result}     issuer reloads (ok, error)
package identity
