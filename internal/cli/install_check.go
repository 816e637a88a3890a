package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/install/check"
)

// CheckCommand is `weft check`: it verifies a cluster before an install
// (--pre) or an installed control plane (and, with --proxy, its meshed
// pods), printing one line per check and exiting 1 when any failed.
func CheckCommand() Command {
	return Command{Name: "check", Summary: "check a cluster before an install (--pre) or an installed control plane and its proxies", Long: checkUsage, Setup: setupCheck}
}

const checkUsage = `Runs checks against the cluster of the current kubeconfig context. Each
prints a line with its result and, when it warns or fails, a hint. The exit
status is 1 when any check failed (warnings do not fail), 2 on bad flags.

While the only failures are things not ready yet (control-plane pods
starting, a webhook Service without ready endpoints, proxies starting),
the checks run again every 5s for up to --wait (5m, as linkerd check
waits), with a line on standard error each time; any other failure (a
missing CRD or object, a refused request, a bad certificate) is reported
at once. --wait 0 runs the checks once. --timeout bounds each run.
`

func setupCheck(fs *FlagSet) Action {
	pre := fs.Bool("pre", false, "check that the cluster is ready for an install instead of checking an installed control plane")
	proxy := fs.Bool("proxy", false, "also check the meshed pods: proxies ready, current proxy image, current trust roots")
	output := fs.StringP("output", "o", "text", "output format: text, json or yaml")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	namespace := fs.String("namespace", vocab.DefaultControlPlaneNamespace, "control-plane namespace")
	timeout := fs.Duration("timeout", time.Minute, "give up on one run of the checks after this long")
	wait := fs.Duration("wait", check.DefaultWait, "while the only failures are things not ready yet, run the checks again for up to this long (0: run once)")
	verbose := fs.Bool("verbose", false, "log API errors in full on stderr")
	return func(ctx context.Context, args []string, stdio IO) int {
		usage := func(format string, a ...any) int {
			fmt.Fprintf(stdio.Stderr, "weft check: "+format+"\n", a...)
			return ExitUsage
		}
		switch {
		case len(args) != 0:
			return usage("unexpected argument %q", args[0])
		case checkOutput(*output, "text", "json", "yaml") != nil:
			return usage("%v", checkOutput(*output, "text", "json", "yaml"))
		case *pre && *proxy:
			return usage("--pre and --proxy do not go together (there are no proxies before an install)")
		case *timeout <= 0:
			return usage("--timeout %s: want a positive duration", *timeout)
		case *wait < 0:
			return usage("--wait %s: want 0 (no waiting) or a positive duration", *wait)
		}

		restCfg, err := kubeRESTConfig(*kubeconfig, *kubeContext, *timeout)
		if err != nil {
			return usage("kubeconfig: %v", err)
		}
		kube, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return usage("kubernetes client: %v", err)
		}
		ext, err := apiextclient.NewForConfig(restCfg)
		if err != nil {
			return usage("apiextensions client: %v", err)
		}
		logger := slog.New(slog.DiscardHandler)
		if *verbose {
			logger = slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		checker, err := check.New(kube, ext, check.WithNamespace(*namespace), check.WithLogger(logger))
		if err != nil {
			return usage("%v", err)
		}
		oneRun := check.SourceFunc(func(ctx context.Context, scope check.Scope) check.Report {
			ctx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			return checker.Check(ctx, scope)
		})
		report := check.Wait(ctx, oneRun, check.Scope{Pre: *pre, Proxy: *proxy}, *wait, check.OnWait(func(rep check.Report, left time.Duration) {
			printWaiting(stdio.Stderr, rep, left)
		}))
		switch *output {
		case "json":
			err = report.WriteJSON(stdio.Stdout)
		case "yaml":
			err = report.WriteYAML(stdio.Stdout)
		default:
			err = report.WriteText(stdio.Stdout)
		}
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft check: %v\n", err)
			return ExitFailure
		}
		if !report.Success {
			return ExitFailure
		}
		return ExitOK
	}
}

// printWaiting tells the user, on stderr, which checks are waited for.
func printWaiting(w io.Writer, rep check.Report, left time.Duration) {
	for _, res := range rep.Results {
		if res.Status == check.StatusFail {
			fmt.Fprintf(w, "waiting (%s left): %s: %s\n", left.Round(time.Second), res.Name, res.Message)
		}
	}
}
