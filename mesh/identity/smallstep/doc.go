// Package smallstep is an identity.Issuer that has a smallstep step-ca
// authority sign workload certificates, so an installation can keep its
// signing key in the CA it already runs (with its HSM or KMS, policies and
// audit) instead of handing an issuer key to the mesh.
//
// The identity service still authenticates the workload and checks the
// CSR. The Issuer then forwards the CSR to step-ca's /1.0/sign endpoint
// with a one-time token it mints for a provisioner: subject and only SAN
// are the workload's identity name, valid for a few minutes, with a unique
// ID so it cannot be replayed. The token is signed with a JWK provisioner's
// private key (Config.Key) or, for an X5C provisioner, with a client
// certificate's key, the chain riding in the token's x5c header
// (Config.X5C). step-ca builds the certificate from
// its template (the default leaf template gives digitalSignature,
// serverAuth and clientAuth). The answer is checked again by the service
// before it reaches the workload.
//
// The step-ca side needs a provisioner whose maximum TLS certificate
// duration covers the mesh's issuance lifetime plus the clock-skew
// allowance (step-ca allows its backdate, one minute by default, on top of
// the maximum). The subpackage smallsteptest starts such an authority
// in-process for tests and examples.
package smallstep
