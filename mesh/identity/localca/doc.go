// Package local is the issuer that signs workload certificates with an
// issuer certificate and private key held by the identity service itself,
// as Linkerd's identity controller does. The key pair comes from a
// directory, in either of the layouts Linkerd accepts:
//
//	linkerd.io/tls     crt.pem, key.pem
//	kubernetes.io/tls  tls.crt, tls.key  (what cert-manager writes)
//
// or straight from a Kubernetes Secret of either type. crt.pem (tls.crt)
// holds the issuer certificate, optionally followed by the intermediates
// between it and the trust anchor. The key may be SEC 1 ("EC PRIVATE
// KEY"), PKCS#8 ("PRIVATE KEY") or PKCS#1 ("RSA PRIVATE KEY").
//
// The issuer refuses to start when the certificate is not a CA, has
// expired, does not match the key, or does not chain to the trust bundle.
// It then follows its source: a replaced key pair is checked the same way
// and swapped in without a restart, with a log line and a count in
// Metrics.IssuerReloads; a bad replacement is logged, counted as an error,
// and the previous pair stays in use.
package local
