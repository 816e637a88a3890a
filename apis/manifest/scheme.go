package manifest

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta1 "github.com/weftmesh/weft/apis/policy/v1beta1"
	policyv1beta2 "github.com/weftmesh/weft/apis/policy/v1beta2"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	serviceprofilev1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
)

// Scheme returns a new scheme holding every kind the decoder accepts: the
// Linkerd kinds of apis/policy and apis/serviceprofile, the Gateway API
// HTTPRoute and GRPCRoute, TCPRoute and TLSRoute (v1 and v1alpha2), and the core kinds a mesh reads (Namespace, Pod,
// Service, ServiceAccount, ConfigMap, Secret, v1 List, Deployment,
// DaemonSet, StatefulSet, ReplicaSet, Job, CronJob, EndpointSlice), each
// with its list kind. Each call builds a fresh scheme that the caller owns.
//
// Core and Gateway API kinds are registered one by one rather than with
// their packages' AddToScheme, so that kinds a mesh never reads (Nodes,
// v1 Endpoints, Gateways, ...) are rejected as unknown instead of being
// silently ignored.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// These builders only call AddKnownTypes and never return an error;
	// TestSchemeRecognizesEveryDocumentedKind checks that every kind is in.
	for _, add := range []func(*runtime.Scheme) error{
		policyv1alpha1.AddToScheme,
		policyv1beta1.AddToScheme,
		policyv1beta2.AddToScheme,
		policyv1beta3.AddToScheme,
		serviceprofilev1alpha2.AddToScheme,
	} {
		_ = add(s)
	}
	addKnown(s, corev1.SchemeGroupVersion,
		&corev1.Namespace{}, &corev1.NamespaceList{},
		&corev1.Pod{}, &corev1.PodList{},
		&corev1.Service{}, &corev1.ServiceList{},
		&corev1.ServiceAccount{}, &corev1.ServiceAccountList{},
		&corev1.ConfigMap{}, &corev1.ConfigMapList{},
		&corev1.Secret{}, &corev1.SecretList{},
		&corev1.List{},
	)
	addKnown(s, appsv1.SchemeGroupVersion,
		&appsv1.Deployment{}, &appsv1.DeploymentList{},
		&appsv1.DaemonSet{}, &appsv1.DaemonSetList{},
		&appsv1.StatefulSet{}, &appsv1.StatefulSetList{},
		&appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{},
	)
	addKnown(s, batchv1.SchemeGroupVersion,
		&batchv1.Job{}, &batchv1.JobList{},
		&batchv1.CronJob{}, &batchv1.CronJobList{},
	)
	addKnown(s, discoveryv1.SchemeGroupVersion,
		&discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{},
	)
	addKnown(s, schema.GroupVersion{Group: gatewayv1.GroupName, Version: "v1"},
		&gatewayv1.HTTPRoute{}, &gatewayv1.HTTPRouteList{},
		&gatewayv1.GRPCRoute{}, &gatewayv1.GRPCRouteList{},
		&gatewayv1.TCPRoute{}, &gatewayv1.TCPRouteList{},
		&gatewayv1.TLSRoute{}, &gatewayv1.TLSRouteList{},
	)
	// TCPRoute and TLSRoute as Linkerd's manifests write them (the
	// experimental channel's v1alpha2).
	addKnown(s, schema.GroupVersion{Group: gatewayv1.GroupName, Version: "v1alpha2"},
		&gatewayv1alpha2.TCPRoute{}, &gatewayv1alpha2.TCPRouteList{},
		&gatewayv1alpha2.TLSRoute{}, &gatewayv1alpha2.TLSRouteList{},
	)
	return s
}

func addKnown(s *runtime.Scheme, gv schema.GroupVersion, types ...runtime.Object) {
	s.AddKnownTypes(gv, types...)
	metav1.AddToGroupVersion(s, gv)
}
