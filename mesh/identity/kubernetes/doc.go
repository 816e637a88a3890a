// Package kubernetes authenticates workloads with the Kubernetes
// TokenReview API: the proxy presents its projected service-account token,
// and the API server says whose it is.
//
// The Authenticator fails closed: an API error, a timeout, a review with an
// error message, authenticated=false, a review that does not echo the
// expected audience, or a username that is not a service account all deny.
// Requests carry the expected audience (default "identity.l5d.io", the
// audience Linkerd's proxy injector projects tokens for), so a token minted
// for another audience is refused by the API server itself, and the
// response's audiences are checked again in case an authenticator ignored
// them.
package kubernetes
