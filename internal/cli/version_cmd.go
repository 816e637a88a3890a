package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/install"
)

// WeftVersionCommand is `weft version`: the client's version, stamped at
// build time, and the control plane's, read from the Deployments `weft
// install` created (their app.kubernetes.io/version label). Without a
// reachable cluster the control plane is reported unavailable; the status
// is still 0 unless --require-control-plane is given.
func WeftVersionCommand() Command {
	return Command{
		Name:    "version",
		Summary: "print the client's version and the control plane's",
		Long: `Prints the version stamped into this binary at build time ("dev" for a plain
go build) and the version of the control plane in the cluster of the current
kubeconfig context, read from the app.kubernetes.io/version label weft install
writes on the controller Deployments. When the control plane cannot be read
(no cluster, not installed, no permission) it says so and still exits 0,
unless --require-control-plane is given (then 1).`,
		Setup: setupVersion,
	}
}

// versionReport is `weft version -o json|yaml`.
type versionReport struct {
	Client       string               `json:"client"`
	ControlPlane *controlPlaneVersion `json:"controlPlane,omitempty"`
}

type controlPlaneVersion struct {
	// Version is the one version every component runs, empty when they
	// differ or none could be read.
	Version string `json:"version,omitempty"`
	// Components maps each controller Deployment's component to its version.
	Components  map[string]string `json:"components,omitempty"`
	Unavailable string            `json:"unavailable,omitempty"`
}

func setupVersion(fs *FlagSet) Action {
	client := fs.Bool("client", false, "print only the client's version (no cluster is contacted)")
	require := fs.Bool("require-control-plane", false, "exit 1 when the control plane's version cannot be read")
	output := fs.StringP("output", "o", "text", "output format: text, json or yaml")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	namespace := fs.String("namespace", vocab.DefaultControlPlaneNamespace, "control-plane namespace")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on the cluster after this long")
	return func(ctx context.Context, args []string, stdio IO) int {
		if len(args) != 0 {
			fmt.Fprintf(stdio.Stderr, "weft version: unexpected argument %q\n", args[0])
			return ExitUsage
		}
		if err := checkOutput(*output, "text", "json", "yaml"); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft version: %v\n", err)
			return ExitUsage
		}
		if *timeout <= 0 {
			fmt.Fprintf(stdio.Stderr, "weft version: --timeout %s: want a positive duration\n", *timeout)
			return ExitUsage
		}
		rep := versionReport{Client: core.BuildVersion()}
		if !*client {
			cp := readControlPlaneVersion(ctx, *kubeconfig, *kubeContext, *namespace, *timeout)
			rep.ControlPlane = &cp
		}
		if *output != "text" {
			if err := writeObject(stdio.Stdout, *output, rep); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft version: %v\n", err)
				return ExitFailure
			}
		} else {
			fmt.Fprintf(stdio.Stdout, "Client version: %s\n", rep.Client)
			if cp := rep.ControlPlane; cp != nil {
				fmt.Fprintf(stdio.Stdout, "Control plane version: %s\n", cp.text())
			}
		}
		if *require && rep.ControlPlane != nil && rep.ControlPlane.Unavailable != "" {
			return ExitFailure
		}
		return ExitOK
	}
}

func (cp controlPlaneVersion) text() string {
	switch {
	case cp.Unavailable != "":
		return "unavailable (" + cp.Unavailable + ")"
	case cp.Version != "":
		return cp.Version
	}
	names := make([]string, 0, len(cp.Components))
	for n := range cp.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = cp.Components[n] + " (" + n + ")"
	}
	return "mixed: " + strings.Join(parts, ", ")
}

func readControlPlaneVersion(ctx context.Context, kubeconfig, kubeContext, namespace string, timeout time.Duration) controlPlaneVersion {
	cfg, err := kubeRESTConfig(kubeconfig, kubeContext, timeout)
	if err != nil {
		return controlPlaneVersion{Unavailable: "no cluster: " + oneLine(err)}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return controlPlaneVersion{Unavailable: oneLine(err)}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cp, err := deploymentsVersion(ctx, kube, namespace)
	if err != nil {
		return controlPlaneVersion{Unavailable: oneLine(err)}
	}
	return cp
}

// deploymentsVersion reads the version of each controller Deployment in
// namespace (those labelled with a control-plane component) from its
// app.kubernetes.io/version label.
func deploymentsVersion(ctx context.Context, kube kubernetes.Interface, namespace string) (controlPlaneVersion, error) {
	list, err := kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{LabelSelector: install.LabelComponent})
	if err != nil {
		return controlPlaneVersion{}, fmt.Errorf("listing the controller Deployments in namespace %s: %w", namespace, err)
	}
	if len(list.Items) == 0 {
		return controlPlaneVersion{}, fmt.Errorf("no control plane in namespace %s", namespace)
	}
	cp := controlPlaneVersion{Components: map[string]string{}}
	versions := map[string]bool{}
	for _, d := range list.Items {
		v := d.Labels[install.LabelVersion]
		if v == "" {
			v = "unknown"
		}
		cp.Components[d.Labels[install.LabelComponent]] = v
		versions[v] = true
	}
	if len(versions) == 1 {
		for v := range versions {
			cp.Version = v
		}
	}
	return cp, nil
}

// oneLine keeps the first line of err, which is what a version line can
// hold.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	var dl interface{ Timeout() bool }
	if errors.As(err, &dl) && dl.Timeout() {
		return "the cluster did not answer: " + s
	}
	return s
}
