package kubernetes

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// GatewayAPIMode says whether a Source watches the Gateway API HTTPRoutes,
// GRPCRoutes, TCPRoutes and TLSRoutes.
type GatewayAPIMode int

const (
	// GatewayAPIAuto follows the CustomResourceDefinitions: the routes of
	// a kind are watched while its CRD exists, is Established and serves
	// v1, and dropped from the snapshot when it is deleted. CRDs installed
	// after the source started are picked up without a restart.
	GatewayAPIAuto GatewayAPIMode = iota
	// GatewayAPIRequired is GatewayAPIAuto, except that New fails when
	// the HTTPRoute or GRPCRoute CRD is missing at start (TCPRoute and
	// TLSRoute, of the experimental channel, stay optional).
	GatewayAPIRequired
	// GatewayAPIOff never watches the Gateway API routes nor their CRDs.
	GatewayAPIOff
)

// ParseGatewayAPIMode reads the values of `weft-controller policy
// --gateway-api`: "auto", "true" (GatewayAPIRequired) or "false"
// (GatewayAPIOff).
func ParseGatewayAPIMode(s string) (GatewayAPIMode, error) {
	switch s {
	case "auto":
		return GatewayAPIAuto, nil
	case "true":
		return GatewayAPIRequired, nil
	case "false":
		return GatewayAPIOff, nil
	}
	return 0, fmt.Errorf("kubernetes: Gateway API mode %q: want auto, true or false", s)
}

// CustomResourceDefinitionsResource is watched, by name, for the Gateway
// API route CRDs unless the mode is GatewayAPIOff.
var CustomResourceDefinitionsResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// GatewayAPICRDs are the names of the CustomResourceDefinitions whose
// routes the source reads, as RBAC resourceNames and as the resource label
// of weft_policy_gateway_api_watched.
var GatewayAPICRDs = []string{"httproutes.gateway.networking.k8s.io", "grpcroutes.gateway.networking.k8s.io",
	"tcproutes.gateway.networking.k8s.io", "tlsroutes.gateway.networking.k8s.io"}

// gatewayKind is one Gateway API route kind: the CRD the source follows
// and, while that CRD is usable, the informer of its routes.
type gatewayKind struct {
	// gvrs are the versions the source reads, preferred first; the
	// routes are watched at the first one the CRD serves.
	gvrs    []schema.GroupVersionResource
	crdName string
	crds    cache.SharedIndexInformer
	// optional kinds are never required (GatewayAPIRequired).
	optional bool

	// route is nil while the kind is not watched. Only New (before the
	// run loop starts) and the run loop touch it.
	route *routeInformer
}

type routeInformer struct {
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
	lister   cache.GenericLister
	stop     context.CancelFunc
}

func newGatewayKinds() []*gatewayKind {
	return []*gatewayKind{
		{gvrs: []schema.GroupVersionResource{GatewayHTTPRoutesResource}, crdName: GatewayAPICRDs[0]},
		{gvrs: []schema.GroupVersionResource{GRPCRoutesResource}, crdName: GatewayAPICRDs[1]},
		// TCPRoute and TLSRoute: v1 where the CRD serves it (Gateway API
		// v1.5 and later, both channels), else v1alpha2 (the earlier
		// experimental channels, which Linkerd's install docs use).
		{gvrs: []schema.GroupVersionResource{TCPRoutesV1Resource, TCPRoutesResource}, crdName: GatewayAPICRDs[2], optional: true},
		{gvrs: []schema.GroupVersionResource{TLSRoutesV1Resource, TLSRoutesResource}, crdName: GatewayAPICRDs[3], optional: true},
	}
}

// crdInformer watches the one CRD named name: a field selector on
// metadata.name, so that RBAC may grant list and watch by resourceNames.
func crdInformer(dyn dynamic.Interface, name string, resync time.Duration) cache.SharedIndexInformer {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return dynamicinformer.NewFilteredDynamicInformer(dyn, CustomResourceDefinitionsResource, "", resync, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = sel }).Informer()
}

// usable reports whether the CRD cached under k's name lets the source
// read the routes at a version it understands, which (the first of k.gvrs
// the CRD serves), and if not, why.
func (k *gatewayKind) usable() (schema.GroupVersionResource, bool, string) {
	obj, exists, err := k.crds.GetStore().GetByKey(k.crdName)
	if err != nil {
		return schema.GroupVersionResource{}, false, err.Error()
	}
	if !exists {
		return schema.GroupVersionResource{}, false, "the CRD is not installed"
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return schema.GroupVersionResource{}, false, fmt.Sprintf("unexpected %T in the CRD cache", obj)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	// Not strict: a newer API server may add fields to CRDs themselves;
	// only the versions and conditions read here matter.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return schema.GroupVersionResource{}, false, fmt.Sprintf("the CRD cannot be read: %v", err)
	}
	var why string
	for _, gvr := range k.gvrs {
		ok, w := crdUsable(crd, gvr.Version)
		if ok {
			return gvr, true, ""
		}
		if why == "" {
			why = w
		}
	}
	if len(k.gvrs) > 1 {
		if ok, _ := crdUsable(crd, ""); ok || why == "" {
			why = "the CRD serves none of the versions this build reads"
		}
	}
	return schema.GroupVersionResource{}, false, why
}

// crdUsable: the CRD is not being deleted, is Established, and serves
// version ("" for any version).
func crdUsable(crd *apiextensionsv1.CustomResourceDefinition, version string) (bool, string) {
	if crd.DeletionTimestamp != nil {
		return false, "the CRD is being deleted"
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		return false, "the CRD is not Established yet"
	}
	for _, v := range crd.Spec.Versions {
		if (version == "" || v.Name == version) && v.Served {
			return true, ""
		}
	}
	return false, fmt.Sprintf("the CRD does not serve version %s, the one this build reads", version)
}

// reconcileGateway starts the route informers of the kinds whose CRD is
// usable and stops those whose CRD no longer is, marking the snapshot
// dirty when a kind stops (its routes leave) or starts (they arrive once
// listed). It runs in New and then only in the run loop.
func (s *Source) reconcileGateway(runCtx context.Context, dyn dynamic.Interface) {
	for _, k := range s.gateway {
		gvr, ok, why := k.usable()
		if ok && k.route != nil && k.route.gvr != gvr {
			// The CRD now serves a version this build prefers (or
			// stopped serving the one watched): watch again at gvr.
			k.route.stop()
			k.route = nil
			s.markDirty()
		}
		switch {
		case ok && k.route == nil:
			k.route = s.startRoutes(runCtx, dyn, gvr)
			s.cfg.logger.Info("kubernetes: watching Gateway API routes", "crd", k.crdName, "version", gvr.Version)
		case !ok && k.route != nil:
			k.route.stop()
			k.route = nil
			s.markDirty()
			s.cfg.logger.Warn("kubernetes: stopped watching Gateway API routes; their policy is dropped", "crd", k.crdName, "reason", why)
		}
	}
}

// startRoutes runs an informer of gvr until runCtx ends or the returned
// stop is called, and marks the snapshot dirty once it has listed.
func (s *Source) startRoutes(runCtx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) *routeInformer {
	ctx, cancel := context.WithCancel(runCtx)
	gi := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, s.cfg.namespace, s.cfg.resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	inf := gi.Informer()
	// AddEventHandler fails only on an informer that has stopped; this
	// one has not started.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.markDirty() },
		UpdateFunc: func(any, any) { s.markDirty() },
		DeleteFunc: func(any) { s.markDirty() },
	})
	s.goroutines.Add(2)
	go func() {
		defer s.goroutines.Done()
		inf.Run(ctx.Done())
	}()
	go func() {
		defer s.goroutines.Done()
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			s.markDirty()
		}
	}()
	return &routeInformer{gvr: gvr, informer: inf, lister: gi.Lister(), stop: cancel}
}
