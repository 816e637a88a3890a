package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/weftmesh/weft/mesh/inject"
)

// InjectCommand is `weft inject`: it adds the linkerd.io/inject annotation
// to the pod templates of the given manifests or, with --manual, the whole
// proxy, using the same renderer as the mutating webhook.
func InjectCommand() Command {
	return Command{Name: "inject", Summary: "add the Weft proxy to Kubernetes workloads in YAML or JSON", Args: "[flags] FILE|DIR|- ...", Setup: setupInject}
}

func setupInject(fs *FlagSet) Action {
	manual := fs.Bool("manual", false, "add the whole proxy to pod templates instead of the linkerd.io/inject annotation")
	output := fs.StringP("output", "o", "yaml", "output format: yaml or json (one JSON object per line)")
	valuesFile := fs.String("values", "", "Values file (YAML or JSON) overriding the defaults, as `weft install` writes it")
	trustAnchors := fs.String("trust-anchors", "", "PEM file of trust anchors handed to the proxies (--manual)")
	verbose := fs.Bool("verbose", false, "report every resolved setting and its source, not only those set by annotations")
	jsonReport := fs.Bool("report-json", false, "write the per-resource report to stderr as JSON lines")
	return func(ctx context.Context, args []string, stdio IO) int {
		if len(args) == 0 {
			fmt.Fprintln(stdio.Stderr, "weft inject: name at least one file, directory or - for stdin")
			return ExitUsage
		}
		values := inject.DefaultValues()
		if *valuesFile != "" {
			data, err := os.ReadFile(*valuesFile)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft inject: --values: %v\n", err)
				return ExitUsage
			}
			if values, err = inject.ParseValues(data); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft inject: --values %s: %v\n", *valuesFile, err)
				return ExitUsage
			}
		}
		if *trustAnchors != "" {
			pem, err := os.ReadFile(*trustAnchors)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft inject: --trust-anchors: %v\n", err)
				return ExitUsage
			}
			values.IdentityTrustAnchorsPEM = string(pem)
		}
		opts := []inject.TransformOption{inject.WithOutput(inject.Format(*output))}
		if *manual {
			opts = append(opts, inject.WithManual())
		}
		if *verbose {
			opts = append(opts, inject.WithVerboseReport())
		}
		if *jsonReport {
			opts = append(opts, inject.WithJSONReport())
		}
		tr, err := inject.NewTransformer(values, opts...)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft inject: %v\n", err)
			return ExitUsage
		}
		inputs, err := inject.ReadInputs(args, stdio.Stdin)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft inject: %v\n", err)
			return ExitUsage
		}
		if _, err := tr.Transform(ctx, inputs, stdio.Stdout, stdio.Stderr); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft inject: %v\n", err)
			return ExitUsage
		}
		return ExitOK
	}
}
