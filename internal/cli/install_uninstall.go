package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// UninstallCommand is `weft uninstall`: it deletes from the cluster
// exactly the objects `weft install` creates (with or without --ha), found
// by kind and name from the same Values.
func UninstallCommand() Command {
	return Command{Name: "uninstall", Summary: "delete every object weft install creates (control plane, webhooks, RBAC, CRDs)", Args: "[flags]", Long: uninstallUsage, Setup: setupUninstall}
}

const uninstallUsage = `Deletes from the cluster of the current kubeconfig context every object that
weft install renders for these Values (the control-plane namespace comes
from them): the webhook configurations first, so that no pod creation waits
on a deleted injector, then the control plane, its namespace and RBAC, and
last the CRDs, which deletes every Server, policy and ServiceProfile stored
in the cluster (--keep-crds keeps them). Objects already gone are reported
and skipped.
`

func setupUninstall(fs *FlagSet) Action {
	valuesFile := fs.String("values", "", "Values file of the install (its controlPlaneNamespace)")
	keepCRDs := fs.Bool("keep-crds", false, "keep the CRDs and the policies and ServiceProfiles stored under them")
	wait := fs.Bool("wait", false, "wait until every object is gone (the namespace takes longest)")
	dryRun := fs.Bool("dry-run", false, "print what would be deleted and delete nothing")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	return func(ctx context.Context, args []string, stdio IO) int {
		usage := func(format string, a ...any) int {
			fmt.Fprintf(stdio.Stderr, "weft uninstall: "+format+"\n", a...)
			return ExitUsage
		}
		if len(args) != 0 {
			return usage("unexpected argument %q", args[0])
		}
		if *timeout <= 0 {
			return usage("--timeout %s: want a positive duration", *timeout)
		}
		values := inject.DefaultValues()
		if *valuesFile != "" {
			data, err := os.ReadFile(*valuesFile)
			if err != nil {
				return usage("%v", err)
			}
			if values, err = inject.ParseValues(data); err != nil {
				return usage("%s: %v", *valuesFile, err)
			}
		}
		objs, err := installedObjects(values, *keepCRDs)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft uninstall: %v\n", err)
			return ExitFailure
		}

		restCfg, err := kubeRESTConfig(*kubeconfig, *kubeContext, *timeout)
		if err != nil {
			return usage("kubeconfig: %v", err)
		}
		dyn, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			return usage("kubernetes client: %v", err)
		}
		disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
		if err != nil {
			return usage("kubernetes client: %v", err)
		}
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()

		var failed bool
		var deleted []dynamic.ResourceInterface
		var names []string
		for _, o := range objs {
			gvk := o.GetObjectKind().GroupVersionKind()
			what := fmt.Sprintf("%s %s", gvk.Kind, o.GetName())
			if o.GetNamespace() != "" {
				what = fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				fmt.Fprintf(stdio.Stdout, "absent  %s (kind not served)\n", what)
				continue
			}
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft uninstall: %s: %v\n", what, err)
				failed = true
				continue
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
			}
			if *dryRun {
				fmt.Fprintf(stdio.Stdout, "would delete %s\n", what)
				continue
			}
			err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
			switch {
			case apierrors.IsNotFound(err):
				fmt.Fprintf(stdio.Stdout, "absent  %s\n", what)
			case err != nil:
				fmt.Fprintf(stdio.Stderr, "weft uninstall: delete %s: %v\n", what, err)
				failed = true
			default:
				fmt.Fprintf(stdio.Stdout, "deleted %s\n", what)
				deleted = append(deleted, ri)
				names = append(names, o.GetName())
			}
		}
		if *wait && !failed {
			for i, ri := range deleted {
				if err := waitGone(ctx, ri, names[i]); err != nil {
					fmt.Fprintf(stdio.Stderr, "weft uninstall: %s still there: %v\n", names[i], err)
					failed = true
				}
			}
		}
		if failed {
			return ExitFailure
		}
		return ExitOK
	}
}

// installedObjects lists what `weft install` creates for values, with and
// without --ha, in deletion order: webhook configurations, namespaced
// objects, the namespace, cluster-scoped RBAC, then (unless keepCRDs) the
// CRDs. The certificates rendered with are throwaway: only kinds and names
// are used.
func installedObjects(values inject.Values, keepCRDs bool) ([]install.Object, error) {
	now := time.Now()
	id, _, err := install.GenerateIdentity(now)
	if err != nil {
		return nil, err
	}
	hook, err := install.GenerateWebhook(values.ControlPlaneNamespace, values.ClusterDomain, now)
	if err != nil {
		return nil, err
	}
	certs := install.Certificates{Identity: id, Webhook: hook}
	seen := map[string]bool{}
	var all []install.Object
	for _, opts := range [][]install.Option{nil, {install.WithHA()}} {
		m, err := install.Render(values, certs, opts...)
		if err != nil {
			return nil, err
		}
		for _, o := range m.Objects {
			key := o.GetObjectKind().GroupVersionKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
			if !seen[key] {
				seen[key] = true
				all = append(all, o)
			}
		}
	}
	rank := func(o install.Object) int {
		switch kind := o.GetObjectKind().GroupVersionKind().Kind; {
		case kind == "MutatingWebhookConfiguration" || kind == "ValidatingWebhookConfiguration":
			return 0
		case o.GetNamespace() != "":
			return 1
		case kind == "Namespace":
			return 2
		case kind == "CustomResourceDefinition":
			return 4
		default:
			return 3
		}
	}
	var out []install.Object
	for r := 0; r <= 4; r++ {
		for _, o := range all {
			if rank(o) == r && (r != 4 || !keepCRDs) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// waitGone polls until the named object is not found.
func waitGone(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	for {
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
