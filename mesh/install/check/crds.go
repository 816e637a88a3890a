package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/crds"
)

const crdHint = "weft install --crds | kubectl apply --server-side -f -"

// crds checks each CRD Weft ships: installed, Established, every version
// served and the same storage version.
func (r *run) crds(ctx context.Context) {
	want, err := crds.All()
	if err != nil {
		r.fail(CategoryCRDs, "Weft's CRDs can be read", err.Error(), "this binary is broken; reinstall it")
		return
	}
	for _, w := range want {
		name := "CRD " + w.Name + " is installed"
		got, err := r.c.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, w.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			r.fail(CategoryCRDs, name, "not found", crdHint)
			continue
		case err != nil:
			r.fail(CategoryCRDs, name, r.apiError("get", err), "check that you may read customresourcedefinitions")
			continue
		}
		if problems := compareCRD(w, got, true); len(problems) > 0 {
			r.fail(CategoryCRDs, name, strings.Join(problems, "; "), crdHint)
			continue
		}
		r.ok(CategoryCRDs, name, fmt.Sprintf("served %s, storage %s", strings.Join(servedVersions(got), ","), storageVersion(got)))
	}
}

// preCRDs accepts CRDs that are absent (the install adds them) or present
// and compatible.
func (r *run) preCRDs(ctx context.Context) {
	const name = "existing CRDs are compatible"
	want, err := crds.All()
	if err != nil {
		r.fail(CategoryPreInstall, name, err.Error(), "this binary is broken; reinstall it")
		return
	}
	var absent, present, problems []string
	for _, w := range want {
		got, err := r.c.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, w.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			absent = append(absent, w.Name)
			continue
		case err != nil:
			problems = append(problems, r.apiError(w.Name, err))
			continue
		}
		present = append(present, w.Name)
		for _, p := range compareCRD(w, got, false) {
			problems = append(problems, w.Name+": "+p)
		}
	}
	if len(problems) > 0 {
		r.fail(CategoryPreInstall, name, list(problems, r.c.cfg.maxListed),
			"another mesh (or an older Weft) installed these CRDs at other versions; "+crdHint+" replaces them, check first that nothing stored depends on the old versions")
		return
	}
	r.ok(CategoryPreInstall, name, fmt.Sprintf("%d present and compatible, %d to be installed", len(present), len(absent)))
}

// compareCRD lists how got (from the cluster) falls short of want (what
// Weft ships). established requires the Established condition.
func compareCRD(want, got *apiextensionsv1.CustomResourceDefinition, established bool) []string {
	var problems []string
	if got.Spec.Names.Kind != want.Spec.Names.Kind {
		problems = append(problems, fmt.Sprintf("kind is %q, want %q", got.Spec.Names.Kind, want.Spec.Names.Kind))
	}
	have := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range got.Spec.Versions {
		have[v.Name] = v
	}
	for _, v := range want.Spec.Versions {
		g, ok := have[v.Name]
		switch {
		case !ok:
			problems = append(problems, "version "+v.Name+" is missing")
		case v.Served && !g.Served:
			problems = append(problems, "version "+v.Name+" is not served")
		}
	}
	if w, g := storageVersion(want), storageVersion(got); w != g {
		problems = append(problems, fmt.Sprintf("storage version is %q, want %q", g, w))
	}
	if established && !crdCondition(got, apiextensionsv1.Established) {
		problems = append(problems, "not Established"+conditionMessage(got, apiextensionsv1.Established))
	}
	return problems
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	return out
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func conditionMessage(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) string {
	for _, c := range crd.Status.Conditions {
		if c.Type == t && c.Message != "" {
			return " (" + c.Message + ")"
		}
	}
	return ""
}

// gatewayHint installs the Gateway API route CRDs Weft follows.
const gatewayHint = "weft install --crds --gateway-api | kubectl apply --server-side -f -"

// gatewayReadVersions are the versions of each Gateway API route kind
// the policy controller reads (mesh/policy/kubernetes; a test keeps the
// two in step): v1 for HTTPRoute and GRPCRoute, v1 or else v1alpha2 for
// TCPRoute and TLSRoute.
var gatewayReadVersions = map[string][]string{
	"HTTPRoute": {"v1"}, "GRPCRoute": {"v1"},
	"TCPRoute": {"v1", "v1alpha2"}, "TLSRoute": {"v1", "v1alpha2"},
}

// gatewayCRDs reports the Gateway API route CRDs the policy controller
// follows. They are optional: one that is absent is not reported (its
// routes are read once it is installed, without a restart); one that is
// present must be Established and serve a version the controller reads.
func (r *run) gatewayCRDs(ctx context.Context) {
	want, err := crds.GatewayAPI()
	if err != nil {
		r.fail(CategoryCRDs, "the Gateway API CRDs can be read", err.Error(), "this binary is broken; reinstall it")
		return
	}
	for _, w := range want {
		kind := w.Spec.Names.Kind
		name := "Gateway API CRD " + w.Name
		got, err := r.c.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, w.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			r.fail(CategoryCRDs, name, r.apiError("get", err), "check that you may read customresourcedefinitions")
			continue
		}
		if !crdCondition(got, apiextensionsv1.Established) {
			r.fail(CategoryCRDs, name, "not Established", gatewayHint)
			continue
		}
		served := servedVersions(got)
		read := ""
		for _, v := range gatewayReadVersions[kind] {
			if slices.Contains(served, v) {
				read = v
				break
			}
		}
		if read == "" {
			r.fail(CategoryCRDs, name, fmt.Sprintf("serves %s; Weft's policy controller reads %ss at %s", strings.Join(served, ","), kind, strings.Join(gatewayReadVersions[kind], " or ")), gatewayHint)
			continue
		}
		r.ok(CategoryCRDs, name, fmt.Sprintf("served %s, %ss read at %s", strings.Join(served, ","), kind, read))
	}
}
