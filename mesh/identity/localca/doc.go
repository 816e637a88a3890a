// Package localca is the issuer that signs workload certificates with an
// issuer certificate and private key held by the identity service itself,
// as Linkerd's identity controller does (the "local CA", as opposed to a
// remote authority such as mesh/identity/smallstep). New reads the key pair
// from a directory, in either of the layouts Linkerd accepts:
//
//	linkerd.io/tls     crt.pem, key.pem
//	kubernetes.io/tls  tls.crt, tls.key  (what cert-manager writes)
//
// crt.pem (tls.crt) holds the issuer certificate, optionally followed by the
// intermediates between it and the trust anchor. Both files are read with
// mesh/identity/certpem: the key may be SEC 1, PKCS#8 or PKCS#1 and must
// belong to the certificate. NewFromLoader takes the pair from anywhere
// else; mesh/identity/kubernetes uses it to follow a Secret, so this
// package links no Kubernetes client.
//
// The issuer refuses to start when the certificate is not a CA, has
// expired, does not match the key, or does not chain to the trust bundle.
// It then follows its source: a replaced key pair is checked the same way
// and swapped in without a restart (Reload), with a log line and a count in
// Metrics.IssuerReloads; a bad replacement is logged, counted as an error,
// and the previous pair stays in use.
//
// Constructors take a context that bounds the start only (as everywhere in
// Weft); an Issuer returned by New follows its directory until Close.
package localca
