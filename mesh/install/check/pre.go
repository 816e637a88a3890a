package check

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// installResources are what `weft install` creates: group, resource and
// whether it lives in the control-plane namespace (or, with in set, in
// that namespace).
var installResources = []struct {
	group, resource string
	namespaced      bool
	in              string
}{
	{"", "namespaces", false, ""},
	{"apiextensions.k8s.io", "customresourcedefinitions", false, ""},
	{"rbac.authorization.k8s.io", "clusterroles", false, ""},
	{"rbac.authorization.k8s.io", "clusterrolebindings", false, ""},
	{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", false, ""},
	{"admissionregistration.k8s.io", "validatingwebhookconfigurations", false, ""},
	{"", "serviceaccounts", true, ""},
	{"", "configmaps", true, ""},
	{"", "secrets", true, ""},
	{"", "services", true, ""},
	{"apps", "deployments", true, ""},
	{"policy", "poddisruptionbudgets", true, ""},
	// The tap API: registered with the aggregation layer, and allowed to
	// read how the API server authenticates itself (kube-system).
	{"apiregistration.k8s.io", "apiservices", false, ""},
	{"rbac.authorization.k8s.io", "rolebindings", false, "kube-system"},
}

func (r *run) preInstall(ctx context.Context) {
	const nsName = "control-plane namespace does not exist yet"
	_, err := r.c.kube.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.ok(CategoryPreInstall, nsName, r.ns)
	case err != nil:
		r.fail(CategoryPreInstall, nsName, r.apiError("get namespace "+r.ns, err), "check that you may read namespaces")
	default:
		r.fail(CategoryPreInstall, nsName, fmt.Sprintf("namespace %q already exists", r.ns),
			"a control plane may already be installed there: run `weft check --namespace "+r.ns+"`, or install into another namespace (controlPlaneNamespace in the values)")
	}

	const permName = "you may create the control plane's resources"
	var denied []string
	for _, res := range installResources {
		attrs := &authorizationv1.ResourceAttributes{Verb: "create", Group: res.group, Resource: res.resource}
		if res.namespaced {
			attrs.Namespace = r.ns
		}
		if res.in != "" {
			attrs.Namespace = res.in
		}
		ssar, err := r.c.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		what := res.resource
		if res.group != "" {
			what += "." + res.group
		}
		switch {
		case err != nil:
			denied = append(denied, r.apiError(what, err))
		case !ssar.Status.Allowed:
			reason := ""
			if ssar.Status.Reason != "" {
				reason = " (" + ssar.Status.Reason + ")"
			}
			denied = append(denied, what+reason)
		}
	}
	if len(denied) > 0 {
		r.fail(CategoryPreInstall, permName, "may not create "+list(denied, len(installResources)),
			"install as a cluster administrator; `kubectl auth can-i create <resource>` shows what you may do")
	} else {
		r.ok(CategoryPreInstall, permName, fmt.Sprintf("allowed to create all %d kinds", len(installResources)))
	}

	r.preCRDs(ctx)
}
