package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/identity/certpem"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// CertsCommand is `weft certs`: create a trust anchor and an identity
// issuer, and inspect certificate files.
func CertsCommand() Command {
	return Command{
		Name:    "certs",
		Summary: "create and inspect the mesh's trust anchor and issuer certificates",
		Sub: []Command{
			{Name: "create-anchor", Args: "--out DIR [flags]", Summary: "write DIR/ca.crt and DIR/ca.key (a self-signed root)", Setup: setupCertsCreateAnchor},
			{Name: "create-issuer", Args: "--anchor DIR --out DIR [flags]", Summary: "write DIR/crt.pem and DIR/key.pem (an issuer signed by the anchor)", Setup: setupCertsCreateIssuer},
			{Name: "inspect", Args: "[--trust-anchors FILE] FILE...", Summary: "show subject, SANs, validity and chain of each certificate", Setup: setupCertsInspect},
		},
	}
}

func setupCertsCreateAnchor(fs *FlagSet) Action {
	out := fs.String("out", "", "directory to write ca.crt and ca.key into (required)")
	cn := fs.String("common-name", pki.DefaultAnchorName, "subject common name")
	lifetime := fs.Duration("lifetime", pki.DefaultLifetime, "validity period")
	force := fs.Bool("force", false, "overwrite existing files")
	return func(_ context.Context, args []string, stdio IO) int {
		if *out == "" || len(args) != 0 {
			fmt.Fprintln(stdio.Stderr, "weft certs create-anchor: --out DIR is required and no arguments are taken")
			return ExitUsage
		}
		kp, err := pki.NewAnchor(pki.Options{CommonName: *cn, Lifetime: *lifetime})
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-anchor: %v\n", err)
			return ExitUsage
		}
		crt, key := filepath.Join(*out, "ca.crt"), filepath.Join(*out, "ca.key")
		if err := writePair(crt, kp.CertPEM, key, kp.KeyPEM, *force); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-anchor: %v\n", err)
			return ExitFailure
		}
		fmt.Fprintf(stdio.Stdout, "wrote %s and %s (%s, valid until %s)\n", crt, key, kp.Cert.Subject, kp.Cert.NotAfter.UTC().Format(time.RFC3339))
		return ExitOK
	}
}

func setupCertsCreateIssuer(fs *FlagSet) Action {
	anchorDir := fs.String("anchor", "", "directory holding the anchor's ca.crt and ca.key (required)")
	out := fs.String("out", "", "directory to write crt.pem and key.pem into (required)")
	cn := fs.String("common-name", pki.DefaultIssuerName, "subject common name")
	lifetime := fs.Duration("lifetime", pki.DefaultLifetime, "validity period (capped at the anchor's expiry)")
	force := fs.Bool("force", false, "overwrite existing files")
	return func(_ context.Context, args []string, stdio IO) int {
		if *anchorDir == "" || *out == "" || len(args) != 0 {
			fmt.Fprintln(stdio.Stderr, "weft certs create-issuer: --anchor DIR and --out DIR are required and no arguments are taken")
			return ExitUsage
		}
		crtPath, keyPath := filepath.Join(*anchorDir, "ca.crt"), filepath.Join(*anchorDir, "ca.key")
		crtPEM, err := os.ReadFile(crtPath)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-issuer: anchor: %v\n", err)
			return ExitFailure
		}
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-issuer: anchor: %v\n", err)
			return ExitFailure
		}
		anchor, err := pki.ParseKeyPair(crtPEM, keyPEM)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-issuer: anchor %s, %s: %v\n", crtPath, keyPath, err)
			return ExitFailure
		}
		kp, err := pki.NewIssuer(anchor, pki.Options{CommonName: *cn, Lifetime: *lifetime})
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-issuer: %v\n", err)
			return ExitFailure
		}
		crt, key := filepath.Join(*out, "crt.pem"), filepath.Join(*out, "key.pem")
		if err := writePair(crt, kp.CertPEM, key, kp.KeyPEM, *force); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft certs create-issuer: %v\n", err)
			return ExitFailure
		}
		fmt.Fprintf(stdio.Stdout, "wrote %s and %s (%s, signed by %s, valid until %s)\n", crt, key, kp.Cert.Subject, anchor.Cert.Subject, kp.Cert.NotAfter.UTC().Format(time.RFC3339))
		return ExitOK
	}
}

// writePair writes a certificate (0644) and its key (0600), refusing to
// replace existing files unless force is set. Nothing is written when
// either file is in the way.
func writePair(crtPath string, crt []byte, keyPath string, key []byte, force bool) error {
	if !force {
		for _, p := range []string{crtPath, keyPath} {
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%s exists (use --force to overwrite)", p)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(crtPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		return err
	}
	return os.WriteFile(crtPath, crt, 0o644)
}

func setupCertsInspect(fs *FlagSet) Action {
	anchorsFile := fs.String("trust-anchors", "", "PEM bundle of trust anchors to check chains against (default: self-signed certificates among the files)")
	return func(_ context.Context, args []string, stdio IO) int {
		if len(args) == 0 {
			fmt.Fprintln(stdio.Stderr, "weft certs inspect: give at least one certificate file")
			return ExitUsage
		}
		var anchors []*x509.Certificate
		if *anchorsFile != "" {
			data, err := os.ReadFile(*anchorsFile)
			if err == nil {
				anchors, err = certpem.ParseCertificates(data)
			}
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft certs inspect: trust anchors %s: %v\n", *anchorsFile, err)
				return ExitFailure
			}
		}
		var entries []pki.Entry
		for _, f := range args {
			data, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft certs inspect: %v\n", err)
				return ExitFailure
			}
			certs, err := pki.FindCertificates(data)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft certs inspect: %s: %v\n", f, err)
				return ExitFailure
			}
			for i, c := range certs {
				src := f
				if len(certs) > 1 {
					src = fmt.Sprintf("%s[%d]", f, i)
				}
				entries = append(entries, pki.Entry{Source: src, Cert: c})
			}
		}
		status := ExitOK
		for _, r := range pki.Inspect(entries, anchors, time.Now()) {
			printReport(stdio.Stdout, r)
			if !r.OK() {
				status = ExitFailure
			}
		}
		return status
	}
}

func printReport(w io.Writer, r pki.Report) {
	fmt.Fprintf(w, "%s\n", r.Source)
	fmt.Fprintf(w, "  subject:    %s\n", r.Subject)
	fmt.Fprintf(w, "  issuer:     %s\n", r.Issuer)
	fmt.Fprintf(w, "  serial:     %s\n", r.Serial)
	kind := "leaf"
	if r.IsCA {
		kind = "CA"
		if r.SelfSigned {
			kind = "CA (self-signed root)"
		}
	}
	fmt.Fprintf(w, "  kind:       %s\n", kind)
	var sans []string
	for _, d := range r.DNSNames {
		sans = append(sans, "DNS:"+d)
	}
	for _, u := range r.URIs {
		sans = append(sans, "URI:"+u)
	}
	for _, ip := range r.IPs {
		sans = append(sans, "IP:"+ip)
	}
	if len(sans) == 0 {
		sans = []string{"(none)"}
	}
	fmt.Fprintf(w, "  SANs:       %s\n", strings.Join(sans, ", "))
	fmt.Fprintf(w, "  not before: %s\n", r.NotBefore.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  not after:  %s\n", r.NotAfter.UTC().Format(time.RFC3339))
	switch {
	case !r.ChainChecked:
		fmt.Fprintf(w, "  chain:      not checked (no trust anchor given or found)\n")
	case r.Chain == nil:
		fmt.Fprintf(w, "  chain:      ok\n")
	default:
		var unknown x509.UnknownAuthorityError
		msg := r.Chain.Error()
		if errors.As(r.Chain, &unknown) {
			msg = "does not chain to a trust anchor"
		}
		fmt.Fprintf(w, "  chain:      FAILED: %s\n", msg)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  WARNING:    %s\n", warn)
	}
}
