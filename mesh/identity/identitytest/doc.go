// Package identitytest holds the test table every identity.Authenticator
// must pass, for the module's own backends (the in-memory Tokens, the
// static token file, TokenReview) and for yours.
//
// A backend's test builds an AuthenticatorFixture (a checker plus the
// tokens it should accept and refuse) and calls RunAuthenticator. The
// table attacks the checker with what a hostile or confused caller sends:
// no token, a token over identity.MaxTokenSize, a token nobody issued, a
// token for another audience, an expired or revoked token, and another
// service account's token. Each refusal must wrap
// identity.ErrUnauthenticated (never ErrUnavailable, which would read as
// an outage); another account's token must prove that account, and the
// Certify service asked for this account's certificate with it must refuse
// with identity.ErrIdentityMismatch before anything is signed. A case the
// backend has no notion of (audiences in a token file) is named in
// NotApplicable and logged, not run.
//
//	func TestMyAuthenticator(t *testing.T) {
//		identitytest.RunAuthenticator(t, identitytest.AuthenticatorFixture{
//			Authn: myAuthn,
//			Valid: webToken, SA: identity.ServiceAccount{Namespace: "shop", Name: "web"},
//			Other: dbToken, OtherSA: identity.ServiceAccount{Namespace: "shop", Name: "db"},
//			WrongAudience: webTokenForVault,
//			Expired:       oldWebToken,
//		})
//	}
package identitytest
