// Package pki creates and inspects the mesh's long-lived certificates: the
// trust anchor (a self-signed root) and the identity issuer (an
// intermediate CA under it), both ECDSA P-256, in the PEM files Linkerd's
// tooling uses. `weft certs` is a thin front end over it.
//
// Inspect reports what an operator needs before a rotation: subject, SANs,
// validity, whether a certificate chains to the given anchors, and a
// warning when less than 30 days remain.
package pki
