package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
)

// MaxCSRSize bounds the size of a certificate signing request, DER or
// PEM. A proxy's P-256 CSR is a few hundred bytes.
const MaxCSRSize = 16 << 10

var (
	oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
)

// ParseCSR parses a certificate signing request given as DER, as Linkerd's
// proxy sends it, or as PEM. It checks size and syntax only; CheckCSR
// decides whether the request is acceptable.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("identity: CSR is empty: %w", ErrInvalidCSR)
	}
	if len(data) > MaxCSRSize {
		return nil, fmt.Errorf("identity: CSR of %d bytes exceeds the limit of %d: %w", len(data), MaxCSRSize, ErrInvalidCSR)
	}
	der := data
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("-----BEGIN")) {
		block, rest := pem.Decode(trimmed)
		if block == nil {
			return nil, fmt.Errorf("identity: CSR: malformed PEM: %w", ErrInvalidCSR)
		}
		if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
			return nil, fmt.Errorf("identity: CSR: PEM block is %q, want CERTIFICATE REQUEST: %w", block.Type, ErrInvalidCSR)
		}
		if len(bytes.TrimSpace(rest)) != 0 {
			return nil, fmt.Errorf("identity: CSR: data after the PEM block: %w", ErrInvalidCSR)
		}
		der = block.Bytes
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("identity: CSR: %w: %w", ErrInvalidCSR, err)
	}
	return csr, nil
}

// CheckCSR decides whether csr may be signed for name. It is a pure
// function of its arguments. The request is refused unless:
//
//   - the key is ECDSA P-256 or P-384, or Ed25519 (RSA of any size is
//     refused, as are other curves);
//   - the self-signature verifies;
//   - there is exactly one DNS SAN and it equals name, with no IP, email or
//     URI SANs;
//   - the subject common name is empty or equals name;
//   - the request does not ask for CA powers (basicConstraints cA=true, or
//     keyUsage keyCertSign or cRLSign).
//
// Other requested extensions are ignored: issuers build certificates from
// their own template and take only the public key from the CSR.
func CheckCSR(csr *x509.CertificateRequest, name Name) error {
	if csr == nil {
		return fmt.Errorf("identity: CSR: missing: %w", ErrInvalidCSR)
	}
	if err := checkPublicKey(csr.PublicKey); err != nil {
		return err
	}
	if err := csr.CheckSignature(); err != nil {
		return fmt.Errorf("identity: CSR: bad signature: %w: %w", ErrInvalidCSR, err)
	}
	want := name.String()
	switch {
	case len(csr.DNSNames) == 0:
		return fmt.Errorf("identity: CSR: no DNS SAN, want exactly %q: %w", want, ErrInvalidCSR)
	case len(csr.DNSNames) > 1:
		return fmt.Errorf("identity: CSR: %d DNS SANs, want exactly %q: %w", len(csr.DNSNames), want, ErrInvalidCSR)
	case csr.DNSNames[0] != want:
		return fmt.Errorf("identity: CSR: DNS SAN %q does not match the identity %q: %w", csr.DNSNames[0], want, ErrInvalidCSR)
	case len(csr.IPAddresses) != 0:
		return fmt.Errorf("identity: CSR: IP address SANs are not allowed (%v): %w", csr.IPAddresses, ErrInvalidCSR)
	case len(csr.EmailAddresses) != 0:
		return fmt.Errorf("identity: CSR: email SANs are not allowed (%v): %w", csr.EmailAddresses, ErrInvalidCSR)
	case len(csr.URIs) != 0:
		return fmt.Errorf("identity: CSR: URI SANs are not allowed (%v): %w", csr.URIs, ErrInvalidCSR)
	}
	if cn := csr.Subject.CommonName; cn != "" && cn != want {
		return fmt.Errorf("identity: CSR: common name %q does not match the identity %q: %w", cn, want, ErrInvalidCSR)
	}
	for _, ext := range csr.Extensions {
		switch {
		case ext.Id.Equal(oidBasicConstraints):
			var bc struct {
				IsCA       bool `asn1:"optional"`
				MaxPathLen int  `asn1:"optional,default:-1"`
			}
			if rest, err := asn1.Unmarshal(ext.Value, &bc); err != nil || len(rest) != 0 {
				return fmt.Errorf("identity: CSR: malformed basicConstraints extension: %w", ErrInvalidCSR)
			}
			if bc.IsCA {
				return fmt.Errorf("identity: CSR: requests a CA certificate (basicConstraints cA=true): %w", ErrInvalidCSR)
			}
		case ext.Id.Equal(oidKeyUsage):
			var bits asn1.BitString
			if rest, err := asn1.Unmarshal(ext.Value, &bits); err != nil || len(rest) != 0 {
				return fmt.Errorf("identity: CSR: malformed keyUsage extension: %w", ErrInvalidCSR)
			}
			// Bit 5 is keyCertSign, bit 6 cRLSign (RFC 5280 4.2.1.3).
			if bits.At(5) == 1 || bits.At(6) == 1 {
				return fmt.Errorf("identity: CSR: requests keyCertSign or cRLSign key usage: %w", ErrInvalidCSR)
			}
		}
	}
	return nil
}

func checkPublicKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return fmt.Errorf("identity: CSR: ECDSA curve %s is not accepted (want P-256 or P-384): %w", k.Curve.Params().Name, ErrInvalidCSR)
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		return fmt.Errorf("identity: CSR: RSA-%d keys are not accepted (want ECDSA P-256, P-384 or Ed25519): %w", k.N.BitLen(), ErrInvalidCSR)
	default:
		return fmt.Errorf("identity: CSR: %T keys are not accepted (want ECDSA P-256, P-384 or Ed25519): %w", pub, ErrInvalidCSR)
	}
}
