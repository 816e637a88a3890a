package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// UninstallCommand is `weft uninstall`: it prints, as a manifest for
// `kubectl delete -f -`, the objects `weft install` creates (with or
// without --ha) that the cluster still has, found by kind and name from
// the same Values; with --delete it deletes them itself.
func UninstallCommand() Command {
	return uninstallCommand(connectUninstall)
}

func uninstallCommand(connect uninstallConnector) Command {
	return Command{Name: "uninstall", Summary: "print (or with --delete, delete) every object weft install created that the cluster still has",
		Args: "[flags]", Long: uninstallUsage, Setup: func(fs *FlagSet) Action { return setupUninstall(fs, connect) }}
}

const uninstallUsage = `Looks in the cluster of the current kubeconfig context for every object
that weft install renders for these Values (the control-plane namespace
comes from them, the --ha and --prometheus-operator objects are included)
and prints those that exist as a YAML manifest, deleting nothing, so that

  weft uninstall | kubectl delete -f -

removes Weft. Standard output holds only the manifest (apiVersion, kind,
name and namespace of each object); what was found absent goes to standard
error. The order is the safe deletion order: the webhook configurations
first, so that no pod creation waits on a deleted injector, then the
control plane, its namespace and RBAC, and last the CRDs, which deletes
every Server, policy and ServiceProfile stored in the cluster (--keep-crds
leaves them out).

--delete deletes the objects itself, in the same order, reporting each
one on standard output (deleted, or absent when already gone); --wait
and --dry-run go with it.
`

// uninstallClients are what weft uninstall asks the cluster with.
type uninstallClients struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// uninstallConnector builds the clients from the kubeconfig flags; tests
// put fakes in its place.
type uninstallConnector func(kubeconfig, kubeContext string, timeout time.Duration) (uninstallClients, error)

func connectUninstall(kubeconfig, kubeContext string, timeout time.Duration) (uninstallClients, error) {
	restCfg, err := kubeRESTConfig(kubeconfig, kubeContext, timeout)
	if err != nil {
		return uninstallClients{}, fmt.Errorf("kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return uninstallClients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return uninstallClients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	return uninstallClients{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

func setupUninstall(fs *FlagSet, connect uninstallConnector) Action {
	valuesFile := fs.String("values", "", "Values file of the install (its controlPlaneNamespace)")
	keepCRDs := fs.Bool("keep-crds", false, "leave out the CRDs (and so keep the policies and ServiceProfiles stored under them)")
	del := fs.Bool("delete", false, "delete the objects instead of printing them, reporting each on standard output")
	wait := fs.Bool("wait", false, "with --delete: wait until every object is gone (the namespace takes longest)")
	dryRun := fs.Bool("dry-run", false, "with --delete: say what would be deleted and delete nothing")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	return func(ctx context.Context, args []string, stdio IO) int {
		usage := func(format string, a ...any) int {
			fmt.Fprintf(stdio.Stderr, "weft uninstall: "+format+"\n", a...)
			return ExitUsage
		}
		switch {
		case len(args) != 0:
			return usage("unexpected argument %q", args[0])
		case *timeout <= 0:
			return usage("--timeout %s: want a positive duration", *timeout)
		case *wait && !*del:
			return usage("--wait goes with --delete (without it weft uninstall deletes nothing: pipe its manifest into kubectl delete --wait -f -)")
		case *dryRun && !*del:
			return usage("--dry-run goes with --delete (without it weft uninstall deletes nothing anyway: it prints what to delete)")
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
		c, err := connect(*kubeconfig, *kubeContext, *timeout)
		if err != nil {
			return usage("%v", err)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if !*del {
			return printInstalled(ctx, c, objs, stdio)
		}
		return deleteInstalled(ctx, c, objs, *dryRun, *wait, stdio)
	}
}

// uninstallTarget is one object of the install as the cluster serves it.
type uninstallTarget struct {
	obj  install.Object
	what string // "Kind name" or "Kind namespace/name", for reports
	ri   dynamic.ResourceInterface
}

// resolve maps o to its resource; served is false when the cluster does
// not serve its kind (the CRD is gone, or the Prometheus Operator's was
// never installed).
func (c uninstallClients) resolve(o install.Object) (t uninstallTarget, served bool, err error) {
	gvk := o.GetObjectKind().GroupVersionKind()
	t = uninstallTarget{obj: o, what: fmt.Sprintf("%s %s", gvk.Kind, o.GetName())}
	if o.GetNamespace() != "" {
		t.what = fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("%s: %w", t.what, err)
	}
	t.ri = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		t.ri = c.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	return t, true, nil
}

// printInstalled writes to stdout the manifest of the objects of objs that
// exist, in objs' order, and reports the absent ones on stderr. When any
// lookup fails it prints no manifest at all: half of one, piped into
// kubectl delete, would remove part of the control plane.
func printInstalled(ctx context.Context, c uninstallClients, objs []install.Object, stdio IO) int {
	var manifest bytes.Buffer
	var failed bool
	found := 0
	for _, o := range objs {
		t, served, err := c.resolve(o)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft uninstall: %v\n", err)
			failed = true
			continue
		}
		if !served {
			fmt.Fprintf(stdio.Stderr, "absent  %s (kind not served)\n", t.what)
			continue
		}
		_, err = t.ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(stdio.Stderr, "absent  %s\n", t.what)
			continue
		case err != nil:
			fmt.Fprintf(stdio.Stderr, "weft uninstall: get %s: %v\n", t.what, err)
			failed = true
			continue
		}
		if err := writeReference(&manifest, o); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft uninstall: %s: %v\n", t.what, err)
			failed = true
			continue
		}
		found++
	}
	if failed {
		fmt.Fprintln(stdio.Stderr, "weft uninstall: no manifest printed, as some objects could not be looked up")
		return ExitFailure
	}
	if found == 0 {
		fmt.Fprintln(stdio.Stderr, "weft uninstall: none of the install's objects is in the cluster; nothing to delete")
		return ExitOK
	}
	if _, err := stdio.Stdout.Write(manifest.Bytes()); err != nil {
		fmt.Fprintf(stdio.Stderr, "weft uninstall: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}

// writeReference writes one YAML document naming o: what kubectl delete
// needs, and nothing of the object's content (no certificates or keys).
func writeReference(w io.Writer, o install.Object) error {
	gvk := o.GetObjectKind().GroupVersionKind()
	md := map[string]string{"name": o.GetName()}
	if o.GetNamespace() != "" {
		md["namespace"] = o.GetNamespace()
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": md})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", b)
	return err
}

// deleteInstalled deletes the objects of objs in order (weft uninstall
// --delete), one report line each on stdout.
func deleteInstalled(ctx context.Context, c uninstallClients, objs []install.Object, dryRun, wait bool, stdio IO) int {
	var failed bool
	var deleted []uninstallTarget
	for _, o := range objs {
		t, served, err := c.resolve(o)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft uninstall: %v\n", err)
			failed = true
			continue
		}
		if !served {
			fmt.Fprintf(stdio.Stdout, "absent  %s (kind not served)\n", t.what)
			continue
		}
		if dryRun {
			fmt.Fprintf(stdio.Stdout, "would delete %s\n", t.what)
			continue
		}
		err = t.ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(stdio.Stdout, "absent  %s\n", t.what)
		case err != nil:
			fmt.Fprintf(stdio.Stderr, "weft uninstall: delete %s: %v\n", t.what, err)
			failed = true
		default:
			fmt.Fprintf(stdio.Stdout, "deleted %s\n", t.what)
			deleted = append(deleted, t)
		}
	}
	if wait && !failed {
		for _, t := range deleted {
			if err := waitGone(ctx, t.ri, t.obj.GetName()); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft uninstall: %s still there: %v\n", t.what, err)
				failed = true
			}
		}
	}
	if failed {
		return ExitFailure
	}
	return ExitOK
}

// installedObjects lists what `weft install` creates for values, with and
// without --ha and --prometheus-operator, in deletion order: webhook
// configurations, namespaced objects, the namespace, cluster-scoped RBAC,
// then (unless keepCRDs) the CRDs. The certificates rendered with are
// throwaway: only kinds and names are used.
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
	tap, err := install.GenerateTap(values.ControlPlaneNamespace, values.ClusterDomain, now)
	if err != nil {
		return nil, err
	}
	certs := install.Certificates{Identity: id, Webhook: hook, Tap: tap}
	seen := map[string]bool{}
	var all []install.Object
	for _, opts := range [][]install.Option{nil, {install.WithHA(), install.WithPrometheusOperator()}} {
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
		case kind == "APIService":
			// First, as the webhooks: an APIService whose Service is gone
			// breaks API discovery for every client of the cluster.
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
