package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/weftmesh/weft/mesh/inject"
)

// InjectCommand is `weft inject`: it adds the linkerd.io/inject annotation
// to the pod templates of the given manifests or, with --manual, the whole
// proxy, using the same renderer as the mutating webhook. It takes
// `linkerd inject`'s per-setting flags, which become config.linkerd.io
// annotations on the pod templates.
func InjectCommand() Command {
	return Command{Name: "inject", Summary: "add the Weft proxy to Kubernetes workloads in YAML or JSON", Args: "[flags] FILE|DIR|- ...", Long: injectLong, Setup: setupInject}
}

// UninjectCommand is `weft uninject`: it removes Weft's and Linkerd's
// sidecars from the given manifests.
func UninjectCommand() Command {
	return Command{
		Name: "uninject", Summary: "remove the Weft (or Linkerd) proxy from Kubernetes workloads in YAML or JSON", Args: "[flags] FILE|DIR|- ...",
		Long:  uninjectLong,
		Setup: setupUninject,
	}
}

const uninjectLong = `Removes Weft's and Linkerd's proxies, init containers, validators and debug
sidecars, their volumes and the linkerd.io/* metadata from the workloads read.

weft inject also annotated the Namespaces it read with linkerd.io/inject:
enabled. While a namespace carries it, the webhook injects every pod created
there, so uninjecting only the Deployments brings the proxy back at their
next restart. Uninject the namespace too (Namespaces read lose the
annotation):

  kubectl get namespace NAME -o yaml | weft uninject - | kubectl replace -f -

or remove the annotation alone: kubectl annotate namespace NAME linkerd.io/inject-`

const injectLong = `Adds linkerd.io/inject: enabled to the pod templates of the workloads read
(files, directories, or - for stdin), so the webhook injects the proxy when
their pods are created; with --manual, adds the proxy itself. Namespaces in
the input are annotated too. The per-setting flags (--proxy-cpu-request,
--skip-inbound-ports, ...) are linkerd inject's: they become
config.linkerd.io annotations on every injected pod template. A workload
that Linkerd injected loses Linkerd's sidecar; a pod with another mesh's
sidecar is an error.`

func setupInject(fs *FlagSet) Action {
	manual := fs.Bool("manual", false, "add the whole proxy to pod templates instead of the linkerd.io/inject annotation")
	output := fs.StringP("output", "o", "yaml", "output format: yaml or json (one JSON object per line)")
	valuesFile := fs.String("values", "", "Values file (YAML or JSON) overriding the defaults, as `weft install` writes it")
	linkerdValues := fs.String("linkerd-values", "", "values file of Linkerd's linkerd-control-plane Helm chart; its proxy and proxyInit keys are mapped (each key not understood is named)")
	trustAnchors := fs.String("trust-anchors", "", "PEM file of trust anchors handed to the proxies (--manual)")
	cpNamespace := fs.StringP("linkerd-namespace", "L", "", "control-plane namespace (--manual; default "+inject.DefaultValues().ControlPlaneNamespace+")")
	verbose := fs.Bool("verbose", false, "report every resolved setting and its source, not only those set by annotations")
	jsonReport := fs.Bool("report-json", false, "write the per-resource report to stderr as JSON lines")
	_ = fs.Bool("ignore-cluster", false, "accepted for Linkerd compatibility: weft inject never reads the cluster's configuration")
	pf := addProxyFlags(fs)
	return func(ctx context.Context, args []string, stdio IO) int {
		return runInject(ctx, args, stdio, injectFlags{*manual, *output, *valuesFile, *linkerdValues, *trustAnchors, *cpNamespace, *verbose, *jsonReport, pf})
	}
}

// injectFlags are weft inject's parsed flags.
type injectFlags struct {
	manual        bool
	output        string
	valuesFile    string
	linkerdValues string
	trustAnchors  string
	cpNamespace   string
	verbose       bool
	jsonReport    bool
	pf            *proxyFlags
}

func runInject(ctx context.Context, args []string, stdio IO, f injectFlags) int {
	manual, output, valuesFile, linkerdValues := &f.manual, &f.output, &f.valuesFile, &f.linkerdValues
	trustAnchors, cpNamespace, verbose, jsonReport, pf := &f.trustAnchors, &f.cpNamespace, &f.verbose, &f.jsonReport, f.pf
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stdio.Stderr, "weft inject: "+format+"\n", a...)
		return ExitUsage
	}
	if len(args) == 0 {
		return fail("name at least one file, directory or - for stdin")
	}
	values := inject.DefaultValues()
	if *linkerdValues != "" {
		lv, err := readLinkerdValues("weft inject", *linkerdValues, values, stdio.Stderr)
		if err != nil {
			return fail("%v", err)
		}
		values = lv.Values
	}
	if *valuesFile != "" {
		data, err := os.ReadFile(*valuesFile)
		if err != nil {
			return fail("--values: %v", err)
		}
		if values, err = inject.ParseValuesOnto(values, data); err != nil {
			return fail("--values %s: %v", *valuesFile, err)
		}
	}
	if *trustAnchors != "" {
		pem, err := os.ReadFile(*trustAnchors)
		if err != nil {
			return fail("--trust-anchors: %v", err)
		}
		values.IdentityTrustAnchorsPEM = string(pem)
	}
	if *cpNamespace != "" {
		values.ControlPlaneNamespace = *cpNamespace
	}
	if err := values.Validate(); err != nil {
		return fail("%v", err)
	}
	overrides, err := pf.annotations(values, stdio.Stderr)
	if err != nil {
		return fail("%v", err)
	}
	if !*manual {
		// The webhook renders with the cluster's Values: what the files
		// ask for must travel as annotations, or it would be lost.
		fromValues, lost := inject.ValuesAnnotations(values, inject.DefaultValues())
		for k, v := range fromValues {
			if _, flagged := overrides[k]; !flagged {
				overrides[k] = v
			}
		}
		if len(lost) > 0 {
			sort.Strings(lost)
			fmt.Fprintf(stdio.Stderr, "weft inject: warning: no annotation carries %s; the webhook uses the cluster's values for them (use --manual to apply them here)\n", strings.Join(lost, ", "))
		}
	}
	opts := []inject.TransformOption{inject.WithOutput(inject.Format(*output))}
	if len(overrides) > 0 {
		opts = append(opts, inject.WithAnnotations(overrides))
	}
	if *manual {
		opts = append(opts, inject.WithManual())
	}
	if *verbose {
		opts = append(opts, inject.WithVerboseReport())
	}
	if *jsonReport {
		opts = append(opts, inject.WithJSONReport())
	}
	return transformFiles(ctx, "weft inject", args, values, opts, stdio)
}

func setupUninject(fs *FlagSet) Action {
	output := fs.StringP("output", "o", "yaml", "output format: yaml or json (one JSON object per line)")
	jsonReport := fs.Bool("report-json", false, "write the per-resource report to stderr as JSON lines")
	return func(ctx context.Context, args []string, stdio IO) int {
		if len(args) == 0 {
			fmt.Fprintln(stdio.Stderr, "weft uninject: name at least one file, directory or - for stdin")
			return ExitUsage
		}
		opts := []inject.TransformOption{inject.WithOutput(inject.Format(*output)), inject.WithUninject()}
		if *jsonReport {
			opts = append(opts, inject.WithJSONReport())
		}
		return transformFiles(ctx, "weft uninject", args, inject.DefaultValues(), opts, stdio)
	}
}

// transformFiles runs a transformer over the named inputs.
func transformFiles(ctx context.Context, prog string, paths []string, values inject.Values, opts []inject.TransformOption, stdio IO) int {
	tr, err := inject.NewTransformer(values, opts...)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", prog, err)
		return ExitUsage
	}
	inputs, err := inject.ReadInputs(paths, stdio.Stdin)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", prog, err)
		return ExitUsage
	}
	var reports io.Writer = stdio.Stderr
	if _, err := tr.Transform(ctx, inputs, stdio.Stdout, reports); err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", prog, err)
		return ExitUsage
	}
	return ExitOK
}
