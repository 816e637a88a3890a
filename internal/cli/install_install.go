package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/crds"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// InstallCommand is `weft install`: it prints the Kubernetes manifests of
// the control plane (or, with --crds, only the CRDs) for kubectl apply.
func InstallCommand() Command {
	return Command{Name: "install", Summary: "print the Kubernetes manifests of the control plane (CRDs, RBAC, Deployments, webhooks)", Args: "[flags] > weft.yaml", Long: installUsage, Setup: setupInstall}
}

const installUsage = `Prints every object the control plane needs, sorted by kind and name, for
kubectl apply. Without certificate flags it generates a trust anchor, an
identity issuer and a webhook certificate, so each run prints different
certificates; give them (--identity-*, --webhook-cert-dir and --tap-cert-dir,
or keep the generated ones with --certs-out DIR) and two runs print identical
bytes.
`

type installFlags struct {
	valuesFile, anchorsFile, issuerDir, issuerScheme string
	linkerdValues                                    string
	webhookDir, controllerImage, certsOut            string
	tapDir                                           string
	controllerPull                                   string
	lifetime                                         time.Duration
	output                                           string
	crdsOnly, gatewayAPI, ha, prometheusOperator     bool
}

func setupInstall(fs *FlagSet) Action {
	var f installFlags
	fs.StringVar(&f.valuesFile, "values", "", "Values file (YAML or JSON; defaults for what it leaves out)")
	fs.StringVarP(&f.output, "output", "o", "yaml", "output format: yaml (a stream of documents) or json (one v1 List)")
	fs.StringVar(&f.linkerdValues, "linkerd-values", "", "values file of Linkerd's linkerd-control-plane Helm chart: its proxy, proxyInit, identity and cluster keys are mapped (each key not understood is named); --values and flags apply on top")
	fs.BoolVar(&f.crdsOnly, "crds", false, "print only the CustomResourceDefinitions (apply them first)")
	fs.BoolVar(&f.gatewayAPI, "gateway-api", false, "with --crds: also print the Gateway API HTTPRoute and GRPCRoute CRDs (standard channel) and TCPRoute and TLSRoute CRDs (experimental channel), "+crds.GatewayAPIVersion()+", upstream's own manifests, for clusters that cannot fetch them")
	fs.BoolVar(&f.prometheusOperator, "prometheus-operator", false, "add a PodMonitor (monitoring.coreos.com/v1) that scrapes every meshed proxy's metrics, for a Prometheus the Prometheus Operator runs")
	fs.BoolVar(&f.ha, "ha", false, "high availability: 3 replicas with anti-affinity and PodDisruptionBudgets, webhooks with failurePolicy Fail")
	fs.StringVar(&f.anchorsFile, "identity-trust-anchors-file", "", "PEM bundle of trust anchors (with --identity-issuer-dir)")
	fs.StringVar(&f.issuerDir, "identity-issuer-dir", "", "directory with the issuer's crt.pem and key.pem (or tls.crt and tls.key)")
	fs.StringVar(&f.issuerScheme, "identity-issuer-scheme", vocab.IssuerSchemeKubernetes, "layout of the issuer Secret: kubernetes.io/tls (tls.crt, tls.key, ca.crt) or linkerd.io/tls (crt.pem, key.pem)")
	fs.DurationVar(&f.lifetime, "identity-issuance-lifetime", 24*time.Hour, "lifetime of the workload certificates the identity service issues")
	fs.StringVar(&f.webhookDir, "webhook-cert-dir", "", "directory with the webhook CA and serving certificate: ca.crt, tls.crt, tls.key (generated when empty)")
	fs.StringVar(&f.tapDir, "tap-cert-dir", "", "directory with the tap API's CA and serving certificate (for "+install.TapServerName("<namespace>")+"): ca.crt, tls.crt, tls.key (generated when empty)")
	fs.StringVar(&f.controllerImage, "controller-image", "", "weft-controller image (default "+install.DefaultControllerImage+":<values version>)")
	fs.StringVar(&f.controllerPull, "controller-image-pull-policy", string(corev1.PullIfNotPresent), "imagePullPolicy of the control-plane containers: Always, IfNotPresent or Never")
	fs.StringVar(&f.certsOut, "certs-out", "", "write the certificates this run generates into DIR (ca.crt, ca.key, issuer/, webhook/, tap/) to pass back next time")
	return func(_ context.Context, args []string, stdio IO) int {
		usage := func(format string, a ...any) int {
			fmt.Fprintf(stdio.Stderr, "weft install: "+format+"\n", a...)
			return ExitUsage
		}
		if len(args) != 0 {
			return usage("unexpected argument %q (the manifests go to stdout)", args[0])
		}
		if err := checkOutput(f.output, "yaml", "json"); err != nil {
			return usage("%v", err)
		}
		if f.gatewayAPI && !f.crdsOnly {
			return usage("--gateway-api goes with --crds: the Gateway API CRDs are printed with Weft's (weft install --crds --gateway-api | kubectl apply -f -)")
		}
		if f.crdsOnly {
			set := []string{}
			fs.Visit(func(fl *pflag.Flag) {
				if fl.Name != "crds" && fl.Name != "output" && fl.Name != "gateway-api" {
					set = append(set, "--"+fl.Name)
				}
			})
			if len(set) > 0 {
				return usage("--crds prints only the CRDs and takes no other flag (got %v)", set)
			}
			m, err := install.CRDs()
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
				return ExitFailure
			}
			if f.gatewayAPI {
				gw, err := install.GatewayAPICRDs()
				if err != nil {
					fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
					return ExitFailure
				}
				m.Objects = append(m.Objects, gw.Objects...)
			}
			return writeManifest(m, f.output, stdio)
		}

		explicit := map[string]bool{}
		fs.Visit(func(fl *pflag.Flag) { explicit[fl.Name] = true })
		base := inject.DefaultValues()
		var lv *install.LinkerdValues
		if f.linkerdValues != "" {
			var err error
			if lv, err = readLinkerdValues("weft install", f.linkerdValues, base, stdio.Stderr); err != nil {
				return usage("%v", err)
			}
			base = lv.Values
			if lv.IssuanceLifetime > 0 && !explicit["identity-issuance-lifetime"] {
				f.lifetime = lv.IssuanceLifetime
			}
			if lv.IssuerScheme != "" && !explicit["identity-issuer-scheme"] {
				f.issuerScheme = lv.IssuerScheme
			}
		}
		values, err := installValues(f.valuesFile, base)
		if err != nil {
			return usage("%v", err)
		}
		now := time.Now()
		var gen generated
		certs := install.Certificates{}
		switch {
		case lv != nil && len(lv.IssuerCertPEM) > 0 && len(lv.IssuerKeyPEM) > 0 && f.issuerDir == "" && f.anchorsFile == "":
			// The Linkerd values carry the issuer (identity.issuer.tls) and
			// the anchors (identityTrustAnchorsPEM).
			if values.IdentityTrustAnchorsPEM == "" {
				return usage("--linkerd-values: identity.issuer.tls is set but identityTrustAnchorsPEM is empty")
			}
			certs.Identity = install.Identity{TrustAnchorsPEM: []byte(values.IdentityTrustAnchorsPEM), IssuerCertPEM: lv.IssuerCertPEM, IssuerKeyPEM: lv.IssuerKeyPEM}
		case f.anchorsFile != "" && f.issuerDir != "":
			if certs.Identity, err = install.LoadIdentity(f.anchorsFile, f.issuerDir); err != nil {
				return usage("%v", err)
			}
		case f.issuerDir != "" && values.IdentityTrustAnchorsPEM != "":
			certPEM, keyPEM, err := install.LoadIssuer(f.issuerDir)
			if err != nil {
				return usage("%v", err)
			}
			certs.Identity = install.Identity{TrustAnchorsPEM: []byte(values.IdentityTrustAnchorsPEM), IssuerCertPEM: certPEM, IssuerKeyPEM: keyPEM}
		case f.issuerDir != "":
			return usage("--identity-issuer-dir needs --identity-trust-anchors-file (or identityTrustAnchorsPEM in the values)")
		case f.anchorsFile != "":
			return usage("--identity-trust-anchors-file needs --identity-issuer-dir: an issuer cannot be generated under an anchor whose private key is not given")
		case values.IdentityTrustAnchorsPEM != "":
			return usage("the values carry identityTrustAnchorsPEM but no --identity-issuer-dir was given: an issuer cannot be generated under an anchor whose private key is not given")
		default:
			if certs.Identity, gen.anchorKey, err = install.GenerateIdentity(now); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
				return ExitFailure
			}
			gen.identity = true
		}
		if f.webhookDir != "" {
			if certs.Webhook, err = install.LoadWebhook(f.webhookDir); err != nil {
				return usage("%v", err)
			}
		} else {
			if certs.Webhook, err = install.GenerateWebhook(values.ControlPlaneNamespace, values.ClusterDomain, now); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
				return ExitFailure
			}
			gen.webhook = true
		}
		// The tap API's serving certificate: the API server trusts it
		// through the APIService's caBundle, rendered alongside, so a fresh
		// one on every install is safe.
		if f.tapDir != "" {
			if certs.Tap, err = install.LoadWebhook(f.tapDir); err != nil {
				return usage("--tap-cert-dir: %v", err)
			}
		} else {
			if certs.Tap, err = install.GenerateTap(values.ControlPlaneNamespace, values.ClusterDomain, now); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
				return ExitFailure
			}
			gen.tap = true
		}

		opts := []install.Option{install.WithIssuanceLifetime(f.lifetime), install.WithIssuerScheme(f.issuerScheme)}
		if lv != nil && lv.ClockSkewAllowance > 0 {
			opts = append(opts, install.WithClockSkewAllowance(lv.ClockSkewAllowance))
		}
		if f.ha {
			opts = append(opts, install.WithHA())
		}
		opts = append(opts, install.WithControllerImagePullPolicy(corev1.PullPolicy(f.controllerPull)))
		if f.prometheusOperator {
			opts = append(opts, install.WithPrometheusOperator())
		}
		if f.controllerImage != "" {
			opts = append(opts, install.WithControllerImage(f.controllerImage))
		}
		m, err := install.Render(values, certs, opts...)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
			return ExitUsage
		}
		if f.certsOut != "" {
			if !gen.identity && !gen.webhook && !gen.tap {
				return usage("--certs-out: this run generated no certificates (all were given)")
			}
			if err := gen.write(f.certsOut, certs); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft install: --certs-out: %v\n", err)
				return ExitFailure
			}
		}
		if gen.identity {
			fmt.Fprint(stdio.Stderr, generatedIdentityWarning(f.certsOut))
		}
		if gen.webhook {
			fmt.Fprintln(stdio.Stderr, "weft install: generated a new webhook CA and serving certificate (pass --webhook-cert-dir to reuse one and print identical output)")
		}
		for _, w := range m.Warnings {
			fmt.Fprintf(stdio.Stderr, "weft install: warning: %s\n", w)
		}
		return writeManifest(m, f.output, stdio)
	}
}

func writeManifest(m *install.Manifest, output string, stdio IO) int {
	data, err := m.YAML()
	if output == "json" {
		data, err = m.JSON()
	}
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
		return ExitFailure
	}
	if _, err := stdio.Stdout.Write(data); err != nil {
		fmt.Fprintf(stdio.Stderr, "weft install: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}

// installValues reads the Values file over the defaults. A release build
// (core.Version set at link time, other than "dev") tags images with its own
// version unless the file names one.
func installValues(path string, base inject.Values) (inject.Values, error) {
	values := base
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return inject.Values{}, fmt.Errorf("--values: %w", err)
		}
		if values, err = inject.ParseValuesOnto(base, data); err != nil {
			return inject.Values{}, fmt.Errorf("--values %s: %w", path, err)
		}
	}
	if core.Version != "" && core.Version != "dev" {
		var keys map[string]any
		if err := yaml.Unmarshal(data, &keys); err == nil {
			if _, set := keys["version"]; !set {
				values.Version = core.Version
				if err := values.Validate(); err != nil {
					return inject.Values{}, fmt.Errorf("build version %q: %w", core.Version, err)
				}
			}
		}
	}
	return values, nil
}

// generated records which certificates this run made.
type generated struct {
	identity, webhook, tap bool
	anchorKey              []byte
}

// write stores the generated certificates under dir, refusing to replace
// files:
//
//	dir/ca.crt, dir/ca.key        the trust anchor and its key
//	dir/issuer/crt.pem, key.pem   the identity issuer
//	dir/webhook/ca.crt, tls.crt, tls.key
//	dir/tap/ca.crt, tls.crt, tls.key
func (g generated) write(dir string, certs install.Certificates) error {
	type file struct {
		path string
		data []byte
		mode os.FileMode
	}
	var files []file
	if g.identity {
		files = append(files,
			file{filepath.Join(dir, "ca.crt"), certs.Identity.TrustAnchorsPEM, 0o644},
			file{filepath.Join(dir, "ca.key"), g.anchorKey, 0o600},
			file{filepath.Join(dir, "issuer", "crt.pem"), certs.Identity.IssuerCertPEM, 0o644},
			file{filepath.Join(dir, "issuer", "key.pem"), certs.Identity.IssuerKeyPEM, 0o600})
	}
	if g.webhook {
		files = append(files,
			file{filepath.Join(dir, "webhook", install.WebhookCAFile), certs.Webhook.CAPEM, 0o644},
			file{filepath.Join(dir, "webhook", install.WebhookCertFile), certs.Webhook.CertPEM, 0o644},
			file{filepath.Join(dir, "webhook", install.WebhookKeyFile), certs.Webhook.KeyPEM, 0o600})
	}
	if g.tap {
		files = append(files,
			file{filepath.Join(dir, "tap", install.WebhookCAFile), certs.Tap.CAPEM, 0o644},
			file{filepath.Join(dir, "tap", install.WebhookCertFile), certs.Tap.CertPEM, 0o644},
			file{filepath.Join(dir, "tap", install.WebhookKeyFile), certs.Tap.KeyPEM, 0o600})
	}
	for _, f := range files {
		if _, err := os.Stat(f.path); err == nil {
			return fmt.Errorf("%s already exists; remove it or pick another directory", f.path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func generatedIdentityWarning(certsOut string) string {
	kept := "The anchor's private key is NOT kept: no new issuer can be made under this anchor, so rotating the issuer later means rotating the anchor too."
	reuse := ""
	if certsOut != "" {
		kept = "The anchor and its private key were written to " + certsOut + "; keep ca.key offline."
		reuse = fmt.Sprintf("\n  To render the same output again: --identity-trust-anchors-file %s --identity-issuer-dir %s --webhook-cert-dir %s --tap-cert-dir %s",
			filepath.Join(certsOut, "ca.crt"), filepath.Join(certsOut, "issuer"), filepath.Join(certsOut, "webhook"), filepath.Join(certsOut, "tap"))
	}
	return `
*************************************************************************
WARNING: weft install GENERATED a new trust anchor and identity issuer
  because no --identity-issuer-dir was given.
  ` + kept + `
  For production, create them yourself:
    weft certs create-anchor --out anchor/
    weft certs create-issuer --anchor anchor/ --out issuer/
    weft install --identity-trust-anchors-file anchor/ca.crt --identity-issuer-dir issuer/` + reuse + `
*************************************************************************

`
}
