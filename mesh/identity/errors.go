package identity

import "errors"

// Sentinel errors callers branch on. Cores wrap them with %w; the gRPC edge
// (Register) maps them to status codes:
//
//	ErrInvalidName, ErrInvalidCSR, ErrInvalidRequest -> InvalidArgument
//	ErrUnauthenticated                              -> Unauthenticated
//	ErrIdentityMismatch                             -> FailedPrecondition
//	ErrRateLimited                                  -> ResourceExhausted
//	ErrUnavailable                                  -> Unavailable
var (
	// ErrInvalidCSR means the certificate signing request was refused.
	ErrInvalidCSR = errors.New("invalid certificate signing request")
	// ErrInvalidRequest means a Certify request was malformed (for
	// example, an empty token).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnauthenticated means the token did not prove an identity: it is
	// unknown, expired, for another audience, or rejected by the backend.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrIdentityMismatch means the token proved an identity other than
	// the one requested.
	ErrIdentityMismatch = errors.New("requested identity does not match the token")
	// ErrRateLimited means the identity the token proves asked for
	// certificates faster than the service's RateLimit allows.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable means a backend (token review API, signer) could not
	// answer. Nothing is issued: the service fails closed.
	ErrUnavailable = errors.New("backend unavailable")
)
