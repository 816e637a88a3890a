package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/policy/v1beta1"
	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
	"github.com/weftmesh/weft/mesh/policy"
)

// Resources the source watches through the dynamic client. Servers are
// read at their storage version v1beta3; the API server converts older
// versions.
var (
	ServersResource                = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}
	ServerAuthorizationsResource   = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta1", Resource: "serverauthorizations"}
	AuthorizationPoliciesResource  = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "authorizationpolicies"}
	MeshTLSAuthenticationsResource = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "meshtlsauthentications"}
	NetworkAuthenticationsResource = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "networkauthentications"}
	HTTPRoutesResource             = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "httproutes"}
	// HTTPLocalRateLimitPoliciesResource is required like the other
	// policy.linkerd.io kinds: Linkerd has shipped its CRD since 2.17, and
	// `weft install --crds` installs it.
	HTTPLocalRateLimitPoliciesResource = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "httplocalratelimitpolicies"}
	// EgressNetworksResource is required too: Linkerd has shipped its
	// CRD since 2.18, and `weft install --crds` installs it.
	EgressNetworksResource    = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "egressnetworks"}
	GatewayHTTPRoutesResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	GRPCRoutesResource        = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "grpcroutes"}
	// TCPRoutes and TLSRoutes are read at v1 where their CRD serves it,
	// else at v1alpha2 (Linkerd's version, served by the experimental
	// channel's CRDs).
	TCPRoutesResource   = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Resource: "tcproutes"}
	TLSRoutesResource   = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Resource: "tlsroutes"}
	TCPRoutesV1Resource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tcproutes"}
	TLSRoutesV1Resource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tlsroutes"}
)

// ListKinds maps each dynamic resource to its list kind, as
// k8s.io/client-go/dynamic/fake.NewSimpleDynamicClientWithCustomListKinds
// needs in tests.
func ListKinds() map[schema.GroupVersionResource]string {
	return map[schema.GroupVersionResource]string{
		ServersResource:                    "ServerList",
		ServerAuthorizationsResource:       "ServerAuthorizationList",
		AuthorizationPoliciesResource:      "AuthorizationPolicyList",
		MeshTLSAuthenticationsResource:     "MeshTLSAuthenticationList",
		NetworkAuthenticationsResource:     "NetworkAuthenticationList",
		HTTPRoutesResource:                 "HTTPRouteList",
		HTTPLocalRateLimitPoliciesResource: "HTTPLocalRateLimitPolicyList",
		EgressNetworksResource:             "EgressNetworkList",
		GatewayHTTPRoutesResource:          "HTTPRouteList",
		GRPCRoutesResource:                 "GRPCRouteList",
		TCPRoutesResource:                  "TCPRouteList",
		TLSRoutesResource:                  "TLSRouteList",
		TCPRoutesV1Resource:                "TCPRouteList",
		TLSRoutesV1Resource:                "TLSRouteList",
		CustomResourceDefinitionsResource:  "CustomResourceDefinitionList",
	}
}

// Source is a policy.Source fed by Kubernetes informers: typed informers
// for Namespaces, Pods, ServiceAccounts and Services, and dynamic
// informers for the policy resources and Gateway API routes, converted to
// the typed apis/policy and Gateway API structs.
type Source struct {
	cfg config

	podLister cache.GenericLister
	nsLister  cache.GenericLister
	saLister  cache.GenericLister
	svcLister cache.GenericLister
	dyn       map[schema.GroupVersionResource]cache.GenericLister

	// gateway holds the Gateway API route kinds, each watched while its
	// CRD is usable (empty with GatewayAPIOff).
	gateway    []*gatewayKind
	crdChanged chan struct{}
	// goroutines counts the informers started outside the factories.
	goroutines sync.WaitGroup

	mu      sync.Mutex
	objs    *policy.Objects
	errs    []error
	watched map[string]bool
	updated chan struct{}
	dirty   chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

type config struct {
	logger      *slog.Logger
	resync      time.Duration
	syncTimeout time.Duration
	debounce    time.Duration
	gateway     GatewayAPIMode
	namespace   string
	metrics     policy.Metrics
}

// Option configures a Source.
type Option func(*config) error

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}

// WithoutGatewayAPI stops the source from watching Gateway API routes
// (HTTPRoutes, GRPCRoutes, TCPRoutes, TLSRoutes) and their CRDs:
// WithGatewayAPI(GatewayAPIOff).
func WithoutGatewayAPI() Option { return WithGatewayAPI(GatewayAPIOff) }

// WithGatewayAPI sets whether the source watches the Gateway API routes
// (default GatewayAPIAuto: while their CRDs are installed).
func WithGatewayAPI(m GatewayAPIMode) Option {
	return func(c *config) error {
		switch m {
		case GatewayAPIAuto, GatewayAPIRequired, GatewayAPIOff:
			c.gateway = m
			return nil
		}
		return fmt.Errorf("kubernetes: unknown Gateway API mode %d", m)
	}
}

// WithMetrics sets the instruments the source records into: the
// GatewayAPIWatched gauge of policy.Metrics (default: none).
func WithMetrics(m policy.Metrics) Option {
	return func(c *config) error {
		c.metrics = m
		return nil
	}
}

// WithSyncTimeout bounds how long New waits for the informers' first
// lists (default 60s).
func WithSyncTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("kubernetes: sync timeout must be positive, got %s", d)
		}
		c.syncTimeout = d
		return nil
	}
}

// WithDebounce sets how long the source waits after a change before it
// publishes a new snapshot, so that bursts publish once (default 50ms).
func WithDebounce(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("kubernetes: debounce must not be negative, got %s", d)
		}
		c.debounce = d
		return nil
	}
}

// WithNamespace restricts the namespaced informers to one namespace.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		c.namespace = ns
		return nil
	}
}

// New starts informers on the clients, waits for their first lists and
// returns with the first snapshot. ctx bounds the start only: the wait
// for the first lists (also bounded by WithSyncTimeout), after which New
// fails with ctx's error having stopped everything; the informers then
// run until Close.
func New(ctx context.Context, client k8s.Interface, dyn dynamic.Interface, opts ...Option) (*Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if client == nil || dyn == nil {
		return nil, errors.New("kubernetes: nil client")
	}
	cfg := config{logger: slog.New(slog.DiscardHandler), syncTimeout: 60 * time.Second, debounce: 50 * time.Millisecond, gateway: GatewayAPIAuto}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	cfg.metrics = kitmetrics.Defaults(cfg.metrics)
	s := &Source{cfg: cfg, dyn: map[schema.GroupVersionResource]cache.GenericLister{},
		updated: make(chan struct{}, 1), dirty: make(chan struct{}, 1), done: make(chan struct{}),
		crdChanged: make(chan struct{}, 1), watched: map[string]bool{}}

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	typed := informers.NewSharedInformerFactoryWithOptions(client, cfg.resync, informers.WithNamespace(cfg.namespace))
	// Namespaces are cluster-scoped: a separate factory without the
	// namespace filter.
	nsFactory := informers.NewSharedInformerFactory(client, cfg.resync)
	dynf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, cfg.resync, cfg.namespace, nil)
	// shutdown stops every informer and waits for them.
	shutdown := func() {
		cancel()
		typed.Shutdown()
		nsFactory.Shutdown()
		dynf.Shutdown()
		s.goroutines.Wait()
	}
	fail := func(err error) (*Source, error) {
		shutdown()
		return nil, err
	}

	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.markDirty() },
		UpdateFunc: func(any, any) { s.markDirty() },
		DeleteFunc: func(any) { s.markDirty() },
	}
	type named struct {
		name     string
		informer cache.SharedIndexInformer
	}
	var all []named
	addTyped := func(name string, gi informers.GenericInformer, err error) (cache.GenericLister, error) {
		if err != nil {
			return nil, err
		}
		if _, err := gi.Informer().AddEventHandler(handler); err != nil {
			return nil, err
		}
		all = append(all, named{name, gi.Informer()})
		return gi.Lister(), nil
	}
	var err error
	ns := corev1.SchemeGroupVersion
	gi, gerr := typed.ForResource(ns.WithResource("pods"))
	if s.podLister, err = addTyped("pods", gi, gerr); err != nil {
		return fail(fmt.Errorf("kubernetes: %w", err))
	}
	gi, gerr = typed.ForResource(ns.WithResource("serviceaccounts"))
	if s.saLister, err = addTyped("serviceaccounts", gi, gerr); err != nil {
		return fail(fmt.Errorf("kubernetes: %w", err))
	}
	gi, gerr = typed.ForResource(ns.WithResource("services"))
	if s.svcLister, err = addTyped("services", gi, gerr); err != nil {
		return fail(fmt.Errorf("kubernetes: %w", err))
	}
	gi, gerr = nsFactory.ForResource(ns.WithResource("namespaces"))
	if s.nsLister, err = addTyped("namespaces", gi, gerr); err != nil {
		return fail(fmt.Errorf("kubernetes: %w", err))
	}
	resources := []schema.GroupVersionResource{ServersResource, ServerAuthorizationsResource, AuthorizationPoliciesResource,
		MeshTLSAuthenticationsResource, NetworkAuthenticationsResource, HTTPRoutesResource, HTTPLocalRateLimitPoliciesResource,
		EgressNetworksResource}
	for _, gvr := range resources {
		gi := dynf.ForResource(gvr)
		l, err := addTyped(gvr.Resource+"."+gvr.Group, gi, nil)
		if err != nil {
			return fail(fmt.Errorf("kubernetes: %w", err))
		}
		s.dyn[gvr] = l
	}
	// The Gateway API route kinds: each CRD is watched by name, and the
	// routes while it is usable.
	if cfg.gateway != GatewayAPIOff {
		crdHandler := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.markCRDChanged() },
			UpdateFunc: func(any, any) { s.markCRDChanged() },
			DeleteFunc: func(any) { s.markCRDChanged() },
		}
		for _, k := range newGatewayKinds() {
			k.crds = crdInformer(dyn, k.crdName, cfg.resync)
			if _, err := k.crds.AddEventHandler(crdHandler); err != nil {
				return fail(fmt.Errorf("kubernetes: %w", err))
			}
			all = append(all, named{"customresourcedefinition " + k.crdName, k.crds})
			s.gateway = append(s.gateway, k)
			s.goroutines.Add(1)
			go func() {
				defer s.goroutines.Done()
				k.crds.Run(runCtx.Done())
			}()
		}
	}

	typed.Start(runCtx.Done())
	nsFactory.Start(runCtx.Done())
	dynf.Start(runCtx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, cfg.syncTimeout)
	defer syncCancel()
	waitSync := func(n named) error {
		if cache.WaitForCacheSync(syncCtx.Done(), n.informer.HasSynced) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kubernetes: waiting for %s: %w", n.name, err)
		}
		return fmt.Errorf("kubernetes: %s did not sync within %s (is the CRD installed and readable?)", n.name, cfg.syncTimeout)
	}
	for _, n := range all {
		if err := waitSync(n); err != nil {
			return fail(err)
		}
	}
	// The routes of the CRDs installed now are part of the first
	// snapshot.
	s.reconcileGateway(runCtx, dyn)
	for _, k := range s.gateway {
		if k.route == nil {
			if cfg.gateway == GatewayAPIRequired && !k.optional {
				_, _, why := k.usable()
				return fail(fmt.Errorf("kubernetes: Gateway API CRD %s: %s (install the Gateway API CRDs, for example with `weft install --crds --gateway-api`, or do not require them)", k.crdName, why))
			}
			s.cfg.logger.Info("kubernetes: Gateway API routes not watched until their CRD is installed", "crd", k.crdName)
			continue
		}
		if err := waitSync(named{k.route.gvr.Resource + "." + k.route.gvr.Group, k.route.informer}); err != nil {
			return fail(err)
		}
	}
	s.objs, s.errs, s.watched = s.snapshot()
	go func() {
		defer close(s.done)
		defer shutdown()
		s.run(runCtx, dyn)
	}()
	return s, nil
}

func (s *Source) markCRDChanged() {
	select {
	case s.crdChanged <- struct{}{}:
	default:
	}
}

func (s *Source) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

func (s *Source) run(ctx context.Context, dyn dynamic.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.crdChanged:
			s.reconcileGateway(ctx, dyn)
			continue
		case <-s.dirty:
		}
		if s.cfg.debounce > 0 {
			t := time.NewTimer(s.cfg.debounce)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		objs, errs, watched := s.snapshot()
		s.mu.Lock()
		s.objs, s.errs, s.watched = objs, errs, watched
		s.mu.Unlock()
		select {
		case s.updated <- struct{}{}:
		default:
		}
	}
}

// snapshot builds Objects from the informers' caches, with the Gateway
// API kinds whose informer has listed (watched, by CRD name, also set on
// the gauge). Objects are shared with the caches and must not be changed;
// the index only reads them.
func (s *Source) snapshot() (*policy.Objects, []error, map[string]bool) {
	o := &policy.Objects{}
	var errs []error
	list := func(l cache.GenericLister) []runtime.Object {
		items, err := l.List(labels.Everything())
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		return items
	}
	for _, it := range list(s.nsLister) {
		if v, ok := it.(*corev1.Namespace); ok {
			o.Namespaces = append(o.Namespaces, v)
		}
	}
	for _, it := range list(s.saLister) {
		if v, ok := it.(*corev1.ServiceAccount); ok {
			o.ServiceAccounts = append(o.ServiceAccounts, v)
		}
	}
	for _, it := range list(s.svcLister) {
		if v, ok := it.(*corev1.Service); ok {
			o.Services = append(o.Services, v)
		}
	}
	for _, it := range list(s.podLister) {
		if v, ok := it.(*corev1.Pod); ok {
			if v.Status.Phase == corev1.PodSucceeded || v.Status.Phase == corev1.PodFailed {
				continue
			}
			o.Workloads = append(o.Workloads, policy.PodWorkload(v))
		}
	}
	listers := maps.Clone(s.dyn)
	watched := map[string]bool{}
	for _, k := range s.gateway {
		// A kind is in the snapshot once its informer has listed: before
		// that, its routes would appear one by one.
		watched[k.crdName] = k.route != nil && k.route.informer.HasSynced()
		if watched[k.crdName] {
			listers[k.route.gvr] = k.route.lister
		}
	}
	for _, name := range GatewayAPICRDs {
		v := 0.0
		if watched[name] {
			v = 1
		}
		s.cfg.metrics.GatewayAPIWatched.With("resource", name).Set(v)
	}
	for gvr, l := range listers {
		for _, it := range list(l) {
			u, ok := it.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if err := s.convert(gvr, u, o); err != nil {
				errs = append(errs, fmt.Errorf("kubernetes: %s %s/%s: %w", gvr.Resource, u.GetNamespace(), u.GetName(), err))
			}
		}
	}
	for _, e := range errs {
		s.cfg.logger.Warn("kubernetes: object skipped", "error", e)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return o, errs, watched
}

func (s *Source) convert(gvr schema.GroupVersionResource, u *unstructured.Unstructured, o *policy.Objects) error {
	conv := runtime.DefaultUnstructuredConverter
	// Strict: a field our types do not know is an error, not silently
	// dropped (a newer CRD version must not widen access unnoticed).
	from := func(into any) error { return conv.FromUnstructuredWithValidation(u.Object, into, true) }
	switch gvr {
	case ServersResource:
		v := &v1beta3.Server{}
		if err := from(v); err != nil {
			return err
		}
		o.Servers = append(o.Servers, v)
	case ServerAuthorizationsResource:
		v := &v1beta1.ServerAuthorization{}
		if err := from(v); err != nil {
			return err
		}
		o.ServerAuthorizations = append(o.ServerAuthorizations, v)
	case AuthorizationPoliciesResource:
		v := &v1alpha1.AuthorizationPolicy{}
		if err := from(v); err != nil {
			return err
		}
		o.AuthorizationPolicies = append(o.AuthorizationPolicies, v)
	case MeshTLSAuthenticationsResource:
		v := &v1alpha1.MeshTLSAuthentication{}
		if err := from(v); err != nil {
			return err
		}
		o.MeshTLSAuthentications = append(o.MeshTLSAuthentications, v)
	case NetworkAuthenticationsResource:
		v := &v1alpha1.NetworkAuthentication{}
		if err := from(v); err != nil {
			return err
		}
		o.NetworkAuthentications = append(o.NetworkAuthentications, v)
	case HTTPRoutesResource:
		v := &v1beta3.HTTPRoute{}
		if err := from(v); err != nil {
			return err
		}
		o.HTTPRoutes = append(o.HTTPRoutes, v)
	case HTTPLocalRateLimitPoliciesResource:
		v := &v1alpha1.HTTPLocalRateLimitPolicy{}
		if err := from(v); err != nil {
			return err
		}
		o.HTTPLocalRateLimitPolicies = append(o.HTTPLocalRateLimitPolicies, v)
	case EgressNetworksResource:
		v := &v1alpha1.EgressNetwork{}
		if err := from(v); err != nil {
			return err
		}
		o.EgressNetworks = append(o.EgressNetworks, v)
	case GatewayHTTPRoutesResource:
		v := &gatewayv1.HTTPRoute{}
		if err := from(v); err != nil {
			return err
		}
		o.GatewayHTTPRoutes = append(o.GatewayHTTPRoutes, v)
	case GRPCRoutesResource:
		v := &gatewayv1.GRPCRoute{}
		if err := from(v); err != nil {
			return err
		}
		o.GRPCRoutes = append(o.GRPCRoutes, v)
	case TCPRoutesV1Resource:
		v := &gatewayv1.TCPRoute{}
		if err := from(v); err != nil {
			return err
		}
		o.TCPRoutes = append(o.TCPRoutes, v)
	case TLSRoutesV1Resource:
		v := &gatewayv1.TLSRoute{}
		if err := from(v); err != nil {
			return err
		}
		o.TLSRoutes = append(o.TLSRoutes, v)
	case TCPRoutesResource, TLSRoutesResource:
		// v1alpha2: through Objects.Add, which converts to v1 (the
		// fields are the same).
		var v runtime.Object = &gatewayv1alpha2.TCPRoute{}
		if gvr == TLSRoutesResource {
			v = &gatewayv1alpha2.TLSRoute{}
		}
		if err := from(v); err != nil {
			return err
		}
		return o.Add(v, policy.Location{})
	}
	return nil
}

// Objects returns the current snapshot.
func (s *Source) Objects() *policy.Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objs
}

// GatewayAPIWatched reports, for each Gateway API route CRD by name
// ("httproutes.gateway.networking.k8s.io"), whether the current snapshot
// holds its routes. It is empty with GatewayAPIOff.
func (s *Source) GatewayAPIWatched() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.watched)
}

// Updated receives after the snapshot changes.
func (s *Source) Updated() <-chan struct{} { return s.updated }

// Errors returns the objects skipped in the current snapshot because they
// could not be converted (a field unknown to this version, a wrong type).
func (s *Source) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// Close stops the informers and waits for them. It is safe to call more
// than once.
func (s *Source) Close() error {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
	return nil
}

var _ policy.Source = (*Source)(nil)
