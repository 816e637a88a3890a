// Command smallstep-identity runs Weft's identity service with a smallstep
// step-ca authority as its signer, then obtains a workload certificate the
// way a proxy does and prints it.
//
// With no flags it starts a throwaway step-ca in-process on loopback; with
// --step-ca-url and friends it uses an authority you run. See README.md.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
	"github.com/weftmesh/weft/mesh/identity/smallstep"
	"github.com/weftmesh/weft/mesh/identity/smallstep/smallsteptest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "smallstep-identity:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("smallstep-identity", flag.ContinueOnError)
	url := fs.String("step-ca-url", "", "step-ca URL (default: start one in-process)")
	rootFile := fs.String("step-ca-root", "", "step-ca root certificate (PEM)")
	prov := fs.String("step-provisioner", "", "JWK provisioner name")
	keyFile := fs.String("step-provisioner-key", "", "provisioner private JWK file")
	passFile := fs.String("step-provisioner-password-file", "", "file holding the JWK's password")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	// 1. The signer: an existing step-ca, or one started here.
	var cfg smallstep.Config
	var anchors *identity.Bundle
	if *url == "" {
		authority, err := smallsteptest.Start(ctx, smallsteptest.Options{})
		if err != nil {
			return err
		}
		defer authority.Close()
		fmt.Fprintf(out, "started step-ca at %s (provisioner %q)\n", authority.URL, authority.Provisioner)
		cfg = smallstep.Config{URL: authority.URL, Roots: authority.Roots, Provisioner: authority.Provisioner, Key: authority.Key}
		if anchors, err = identity.NewBundle(authority.Root); err != nil {
			return err
		}
	} else {
		if *rootFile == "" || *prov == "" || *keyFile == "" {
			return errors.New("--step-ca-url needs --step-ca-root, --step-provisioner and --step-provisioner-key")
		}
		rootPEM, err := os.ReadFile(*rootFile)
		if err != nil {
			return err
		}
		if anchors, err = identity.ParseBundle(rootPEM); err != nil {
			return err
		}
		var password []byte
		if *passFile != "" {
			p, err := os.ReadFile(*passFile)
			if err != nil {
				return err
			}
			password = []byte(strings.TrimSpace(string(p)))
		}
		key, err := smallstep.LoadJWK(*keyFile, password)
		if err != nil {
			return err
		}
		cfg = smallstep.Config{URL: *url, Roots: anchors.Pool(), Provisioner: *prov, Key: key}
	}
	issuer, err := smallstep.New(ctx, cfg)
	if err != nil {
		return err
	}

	// 2. The identity service, with step-ca as its Issuer and a fixed token
	// table standing in for Kubernetes TokenReview.
	svc, err := identity.NewService(ctx, identity.Tokens{"demo-token": {Namespace: "shop", Name: "web"}}, issuer)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fmt.Fprintf(out, "identity service on %s\n", lis.Addr())

	// 3. A workload obtains its certificate over gRPC, as a proxy does.
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	name, err := identity.DefaultDomain().Name("shop", "web")
	if err != nil {
		return err
	}
	c, err := client.New(ctx, client.Config{Name: name, Bundle: anchors, Certifier: client.NewGRPCCertifier(conn)},
		client.WithToken(func() ([]byte, error) { return []byte("demo-token"), nil }))
	if err != nil {
		return err
	}
	defer c.Close()
	cert, err := c.Certificate()
	if err != nil {
		return err
	}
	leaf := cert.Leaf
	issuerCert, err := x509.ParseCertificate(cert.Certificate[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "certificate for %s\n", leaf.DNSNames[0])
	fmt.Fprintf(out, "  issued by   %s\n", issuerCert.Subject)
	fmt.Fprintf(out, "  valid until %s\n", leaf.NotAfter.UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "  renews at   %s (70%% of its lifetime)\n",
		leaf.NotBefore.Add(time.Duration(float64(leaf.NotAfter.Sub(leaf.NotBefore))*client.RenewFraction)).UTC().Format(time.RFC3339))
	return nil
}
