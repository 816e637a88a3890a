// Package client is the proxy side of mesh identity: it obtains the
// workload's certificate from the identity service, keeps it fresh, and
// hands it to TLS.
//
// New returns once the first certificate is there:
//
//	c, err := client.New(ctx, client.Config{
//		Name:      name,                              // identity.Name of this workload
//		TokenFile: "/var/run/secrets/tokens/weft-identity-token",
//		Bundle:    bundle,                            // identity.BundleSource
//		Certifier: client.NewGRPCCertifier(conn),     // or an *identity.Service
//	})
//	defer c.Close()
//
// The private key is generated locally (ECDSA P-256, a fresh one for each
// renewal) and never leaves the process; the token file is read before
// every request, so a rotated projected token is used.
//
// # Renewal
//
// A certificate is renewed at 70% of its lifetime (NotBefore to NotAfter),
// bounded by WithRefreshBounds (10s to 24h by default). A failed renewal is
// retried with exponential backoff (WithBackoff, 1s doubling to 1m), each
// delay jittered between half and all of its value. Meanwhile the current
// certificate keeps being served until it expires; after that Certificate
// returns ErrNoCertificate and handshakes fail until a renewal succeeds.
// Updated signals each new certificate. Every certificate is checked
// before use: it must chain to the bundle for serverAuth and clientAuth,
// carry exactly this workload's name, and hold the key just generated.
// The clock is injected (WithClock) so the schedule can be tested.
//
// # TLS
//
// Mesh traffic is TLS 1.3 only, with session tickets off:
//
//   - ServerTLSConfig(authorize) presents the current certificate,
//     requires a client certificate and verifies it with
//     identity.VerifyPeer (clientAuth, same domain, then authorize);
//     PeerName reads the verified client identity from the connection
//     state.
//   - ClientTLSConfig(expected) presents the current certificate and
//     accepts only a server proving expected, the identity discovery gave
//     for the endpoint.
//   - ServerCredentials and ClientCredentials wrap both for gRPC.
//
// The configurations read the current certificate and bundle on each
// handshake, so renewals and bundle rotations need no new config.
package client
