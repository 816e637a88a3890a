// Package endpoint holds the value discovery hands the proxy for each
// address a destination resolves to: Endpoint, and the protocol hint it
// carries.
//
// It sits below package dataplane so that dataplane (whose Resolver seam
// delivers endpoints, and which re-exports the types as dataplane.Endpoint
// and dataplane.ProtocolHint) and the proxy's packages by concern under
// mesh/dataplane/internal (which balance, dial, meter and tap endpoints)
// can all name the same type. It imports only the standard library and
// holds values, no behaviour of the proxy.
//
// What it trusts: nothing. An Endpoint is whatever the Resolver
// implementation delivered; the proxy's packages that use it decide what
// each field is allowed to do (an empty Identity means plaintext, for
// instance, and is the Resolver's statement, not the peer's).
package endpoint
