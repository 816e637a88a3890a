package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy"
)

// StatusLeaseName is the Lease the policy controller's replicas hold to
// decide which one writes route status.
const StatusLeaseName = vocab.LeasePolicyStatus

// StatusFieldManager is the field manager of the status writes.
const StatusFieldManager = "weft-policy-controller"

// StatusWriter writes status.parents on the HTTPRoutes, GRPCRoutes,
// TCPRoutes and TLSRoutes whose parents policy serves (policy.linkerd.io
// Servers, core Services and policy.linkerd.io EgressNetworks), as
// Linkerd's policy controller does: one entry per parent with
// controllerName policy.ControllerName and an Accepted condition (and, for
// a Service or EgressNetwork parent, ResolvedRefs); and the Accepted
// condition in status.conditions of every EgressNetwork. It is a runner:
// Run writes after every index rebuild and every resync period while this
// replica holds the status Lease (or always, without WithStatusLease), and
// only the objects whose computed status differs from what they carry.
// Entries of other controllers (route parents of other controllers,
// EgressNetwork conditions of other types) are kept as they are.
type StatusWriter struct {
	dyn dynamic.Interface
	x   *policy.Indexer
	cfg statusConfig
}

type statusConfig struct {
	logger   *slog.Logger
	clock    func() time.Time
	resync   time.Duration
	timeout  time.Duration
	lease    *leaseConfig
	onPass   func(writes, failures int)
	leaseDur time.Duration
}

type leaseConfig struct {
	client              k8s.Interface
	namespace, identity string
}

// StatusOption configures a StatusWriter.
type StatusOption func(*statusConfig) error

// WithStatusLogger sets the logger (default: discard).
func WithStatusLogger(l *slog.Logger) StatusOption {
	return func(c *statusConfig) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}

// WithStatusLease makes the writer write only while it holds the Lease
// StatusLeaseName in namespace, as identity (unique per replica, such as
// the pod name), through client-go's leader election. Without it every
// writer writes, which is right for a single replica only.
func WithStatusLease(client k8s.Interface, namespace, identity string) StatusOption {
	return func(c *statusConfig) error {
		if client == nil || namespace == "" || identity == "" {
			return errors.New("policy status: the lease needs a client, a namespace and an identity")
		}
		c.lease = &leaseConfig{client: client, namespace: namespace, identity: identity}
		return nil
	}
}

// WithStatusResync sets how often every route's status is checked again
// besides after each index rebuild, which also retries failed writes
// (default 10s, Linkerd's reconciliation period).
func WithStatusResync(d time.Duration) StatusOption {
	return func(c *statusConfig) error {
		if d <= 0 {
			return fmt.Errorf("policy status: resync period %s is not positive", d)
		}
		c.resync = d
		return nil
	}
}

// WithStatusLeaseDuration sets how long a Lease holder's claim lasts
// (default 30s, as Linkerd's); the renew deadline is two thirds of it and
// the retry period a sixth.
func WithStatusLeaseDuration(d time.Duration) StatusOption {
	return func(c *statusConfig) error {
		if d < 3*time.Second {
			return fmt.Errorf("policy status: lease duration %s is under 3s", d)
		}
		c.leaseDur = d
		return nil
	}
}

// WithStatusPassHook calls f after every pass over the routes with the
// number of status writes it tried and how many of them failed, for
// metrics and tests. Only the replica that writes makes passes. f must
// not block.
func WithStatusPassHook(f func(writes, failures int)) StatusOption {
	return func(c *statusConfig) error {
		c.onPass = f
		return nil
	}
}

// NewStatusWriter returns a writer of route status from x's index,
// through dyn. It starts nothing; Run writes.
func NewStatusWriter(dyn dynamic.Interface, x *policy.Indexer, opts ...StatusOption) (*StatusWriter, error) {
	if dyn == nil || x == nil {
		return nil, errors.New("policy status: nil client or indexer")
	}
	cfg := statusConfig{
		logger:   slog.New(slog.DiscardHandler),
		clock:    time.Now,
		resync:   10 * time.Second,
		timeout:  5 * time.Second,
		leaseDur: 30 * time.Second,
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &StatusWriter{dyn: dyn, x: x, cfg: cfg}, nil
}

// Run writes status until ctx ends (releasing the Lease if it holds it)
// and returns nil then.
func (w *StatusWriter) Run(ctx context.Context) error {
	if w.cfg.lease == nil {
		w.write(ctx)
		return nil
	}
	l := w.cfg.lease
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.namespace, Name: StatusLeaseName},
		Client:     l.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.identity},
	}
	// The elector starts OnStartedLeading in a goroutine of its own and
	// does not wait for it; the writing happens here instead, on the
	// context handed over, so nothing outlives Run.
	leading := make(chan context.Context)
	lec := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   w.cfg.leaseDur,
		RenewDeadline:   w.cfg.leaseDur * 2 / 3,
		RetryPeriod:     w.cfg.leaseDur / 6,
		ReleaseOnCancel: true,
		Name:            StatusLeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				select {
				case leading <- lctx:
				case <-lctx.Done():
				}
			},
			OnStoppedLeading: func() {},
		},
	}
	if _, err := leaderelection.NewLeaderElector(lec); err != nil {
		return fmt.Errorf("policy status: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Run returns when the lease is lost; stand again, with a new
		// elector, until ctx ends.
		for ctx.Err() == nil {
			le, err := leaderelection.NewLeaderElector(lec)
			if err != nil {
				return // the same configuration was accepted above
			}
			le.Run(ctx)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case lctx := <-leading:
			w.cfg.logger.Info("policy status: this replica writes route status", "lease", l.namespace+"/"+StatusLeaseName, "identity", l.identity)
			w.write(lctx)
			w.cfg.logger.Info("policy status: this replica no longer writes route status", "identity", l.identity)
		}
	}
}

// write reconciles after every index and every resync until ctx ends.
func (w *StatusWriter) write(ctx context.Context) {
	kick := make(chan struct{}, 1)
	cancel := w.x.Subscribe(func(*policy.Index) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	defer cancel()
	tick := time.NewTicker(w.cfg.resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick.C:
		}
		w.reconcile(ctx)
	}
}

// reconcile writes the status of every route and EgressNetwork whose
// computed status differs from the one it carries.
func (w *StatusWriter) reconcile(ctx context.Context) {
	now := w.cfg.clock()
	writes, failures := 0, 0
	defer func() {
		if w.cfg.onPass != nil {
			w.cfg.onPass(writes, failures)
		}
	}()
	ix := w.x.Index()
	for _, st := range ix.EgressNetworkStatuses() {
		if ctx.Err() != nil {
			return
		}
		conds, changed := st.Merge(now)
		if !changed {
			continue
		}
		writes++
		err := w.patchEgress(ctx, st, conds)
		if err != nil {
			failures++
		}
		w.logWrite(err, "EgressNetwork", st.Ref().String())
	}
	for _, st := range ix.RouteStatuses() {
		if ctx.Err() != nil {
			return
		}
		parents, changed := st.Merge(now)
		if !changed {
			continue
		}
		writes++
		err := w.patch(ctx, st, parents)
		if err != nil {
			failures++
		}
		w.logWrite(err, "route", st.Ref().String())
	}
}

// logWrite logs the outcome of one status write of an object of kind
// what ("route", "EgressNetwork").
func (w *StatusWriter) logWrite(err error, what, ref string) {
	switch {
	case err == nil:
		w.cfg.logger.Info("policy status: wrote "+what+" status", "object", ref)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// The object changed or went since the index read it; the
		// rebuild that follows brings its new version.
		w.cfg.logger.Debug("policy status: "+what+" changed before its status was written", "object", ref, "err", err)
	default:
		w.cfg.logger.Warn("policy status: writing "+what+" status failed", "object", ref, "err", err)
	}
}

// egressStatusPatch is a JSON merge patch of an EgressNetwork's status
// subresource, conditional on its resourceVersion as statusPatch is.
type egressStatusPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

func (w *StatusWriter) patchEgress(ctx context.Context, st policy.EgressNetworkStatus, conds []metav1.Condition) error {
	var p egressStatusPatch
	p.Metadata.ResourceVersion = st.ResourceVersion
	p.Status.Conditions = conds
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("policy status: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.timeout)
	defer cancel()
	_, err = w.dyn.Resource(EgressNetworksResource).Namespace(st.Namespace).Patch(ctx, st.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: StatusFieldManager}, "status")
	return err
}

// statusPatch is a JSON merge patch of a route's status subresource. The
// resourceVersion makes it conditional: the API server refuses it when
// the route changed since it was read, so a status computed from an old
// version never overwrites a newer one (or another controller's entry
// written in between).
type statusPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Parents []gatewayv1.RouteParentStatus `json:"parents"`
	} `json:"status"`
}

func (w *StatusWriter) patch(ctx context.Context, st policy.RouteStatus, parents []gatewayv1.RouteParentStatus) error {
	gvrs, err := routeResources(st)
	if err != nil {
		return err
	}
	var p statusPatch
	p.Metadata.ResourceVersion = st.ResourceVersion
	p.Status.Parents = parents
	if p.Status.Parents == nil {
		p.Status.Parents = []gatewayv1.RouteParentStatus{}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("policy status: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.timeout)
	defer cancel()
	// TCPRoutes and TLSRoutes: at v1, or at v1alpha2 where the CRD does
	// not serve v1 (the API server answers NotFound for a version it does
	// not serve, as for a route that is gone, which the second try finds
	// gone too).
	for i, gvr := range gvrs {
		_, err = w.dyn.Resource(gvr).Namespace(st.Namespace).Patch(ctx, st.Name, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: StatusFieldManager}, "status")
		if err == nil || !apierrors.IsNotFound(err) || i == len(gvrs)-1 {
			break
		}
	}
	return err
}

func routeResources(st policy.RouteStatus) ([]schema.GroupVersionResource, error) {
	switch {
	case st.Group == HTTPRoutesResource.Group && st.Kind == "HTTPRoute":
		return []schema.GroupVersionResource{HTTPRoutesResource}, nil
	case st.Group == GatewayHTTPRoutesResource.Group && st.Kind == "HTTPRoute":
		return []schema.GroupVersionResource{GatewayHTTPRoutesResource}, nil
	case st.Group == GRPCRoutesResource.Group && st.Kind == "GRPCRoute":
		return []schema.GroupVersionResource{GRPCRoutesResource}, nil
	case st.Group == TCPRoutesResource.Group && st.Kind == "TCPRoute":
		return []schema.GroupVersionResource{TCPRoutesV1Resource, TCPRoutesResource}, nil
	case st.Group == TLSRoutesResource.Group && st.Kind == "TLSRoute":
		return []schema.GroupVersionResource{TLSRoutesV1Resource, TLSRoutesResource}, nil
	}
	return nil, fmt.Errorf("policy status: no resource for %s.%s", st.Kind, st.Group)
}
