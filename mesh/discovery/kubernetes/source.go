package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	kclient "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ServiceProfileResource is the API resource of Linkerd's ServiceProfile.
var ServiceProfileResource = schema.GroupVersionResource{Group: spv1alpha2.GroupName, Version: "v1alpha2", Resource: "serviceprofiles"}

// Sink receives the objects the informers see. *discovery.Index
// implements it.
type Sink interface {
	Upsert(objs ...runtime.Object) error
	Delete(objs ...runtime.Object) error
}

// Option tunes New.
type Option func(*config)

type config struct {
	resync time.Duration
	logger *slog.Logger
}

// WithResync sets the informers' resync period (default 0: no periodic
// resync; watches keep the cache current).
func WithResync(d time.Duration) Option { return func(c *config) { c.resync = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// Source keeps a Sink in step with a Kubernetes cluster.
type Source struct {
	cfg     config
	sink    Sink
	factory informers.SharedInformerFactory
	dynf    dynamicinformer.DynamicSharedInformerFactory
	stop    chan struct{}
	updated chan struct{}

	closeOnce sync.Once
}

// New starts informers on client (and, when dyn is not nil, on
// ServiceProfiles through dyn), feeding sink, and returns once their
// initial lists are applied or ctx ends (then with ctx's error, having
// stopped everything). ctx bounds the start only; the informers run until
// Close.
func New(ctx context.Context, sink Sink, client kclient.Interface, dyn dynamic.Interface, opts ...Option) (*Source, error) {
	if sink == nil || client == nil {
		return nil, errors.New("kubernetes: New needs a sink and a client")
	}
	if ctx.Err() != nil {
		// Informers of a fake or fast client can sync before the wait
		// notices ctx: an ended ctx is refused before anything starts.
		return nil, fmt.Errorf("kubernetes: informers did not sync: %w", context.Cause(ctx))
	}
	cfg := config{logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	s := &Source{
		cfg:     cfg,
		sink:    sink,
		factory: informers.NewSharedInformerFactory(client, cfg.resync),
		stop:    make(chan struct{}),
		updated: make(chan struct{}, 1),
	}
	var synced []cache.InformerSynced
	add := func(inf cache.SharedIndexInformer, kind string, convert func(any) (runtime.Object, error)) error {
		reg, err := inf.AddEventHandler(s.handler(kind, convert))
		if err != nil {
			return fmt.Errorf("kubernetes: watch %s: %w", kind, err)
		}
		synced = append(synced, reg.HasSynced)
		return nil
	}
	typed := func(o any) (runtime.Object, error) {
		ro, ok := o.(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("unexpected %T", o)
		}
		return ro, nil
	}
	podInf := s.factory.Core().V1().Pods().Informer()
	if err := podInf.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("kubernetes: pod transform: %w", err)
	}
	for _, w := range []struct {
		inf  cache.SharedIndexInformer
		kind string
	}{
		{s.factory.Core().V1().Namespaces().Informer(), "Namespace"},
		{s.factory.Core().V1().Services().Informer(), "Service"},
		{podInf, "Pod"},
		{s.factory.Discovery().V1().EndpointSlices().Informer(), "EndpointSlice"},
	} {
		if err := add(w.inf, w.kind, typed); err != nil {
			return nil, err
		}
	}
	if dyn != nil {
		s.dynf = dynamicinformer.NewDynamicSharedInformerFactory(dyn, cfg.resync)
		if err := add(s.dynf.ForResource(ServiceProfileResource).Informer(), "ServiceProfile", toServiceProfile); err != nil {
			return nil, err
		}
	}
	s.factory.Start(s.stop)
	if s.dynf != nil {
		s.dynf.Start(s.stop)
	}
	// The wait stops when ctx ends; the helper goroutine ends with the
	// wait, whichever way it ends.
	waitStop, waited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(waitStop)
		select {
		case <-ctx.Done():
		case <-s.stop:
		case <-waited:
		}
	}()
	ok := cache.WaitForCacheSync(waitStop, synced...)
	close(waited)
	<-waitStop
	if !ok {
		s.Close()
		return nil, fmt.Errorf("kubernetes: informers did not sync: %w", context.Cause(ctx))
	}
	return s, nil
}

// handler applies informer events to the sink.
func (s *Source) handler(kind string, convert func(any) (runtime.Object, error)) cache.ResourceEventHandler {
	apply := func(o any, deleted bool) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		obj, err := convert(o)
		if err != nil {
			s.cfg.logger.Warn("kubernetes: ignoring object that does not convert", "kind", kind, "error", err)
			return
		}
		if deleted {
			err = s.sink.Delete(obj)
		} else {
			err = s.sink.Upsert(obj)
		}
		if err != nil {
			s.cfg.logger.Warn("kubernetes: sink refused object", "kind", kind, "error", err)
			return
		}
		select {
		case s.updated <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { apply(o, false) },
		UpdateFunc: func(_, o any) { apply(o, false) },
		DeleteFunc: func(o any) { apply(o, true) },
	}
}

// Updated receives a signal after events were applied to the sink;
// signals coalesce.
func (s *Source) Updated() <-chan struct{} { return s.updated }

// Close stops the informers and waits for their goroutines. It is
// idempotent.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.factory.Shutdown()
		if s.dynf != nil {
			s.dynf.Shutdown()
		}
	})
	return nil
}

// toServiceProfile converts an unstructured ServiceProfile, refusing
// unknown fields so that a typo never silently drops a route.
func toServiceProfile(o any) (runtime.Object, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", o)
	}
	var sp spv1alpha2.ServiceProfile
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &sp, true); err != nil {
		return nil, fmt.Errorf("ServiceProfile %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &sp, nil
}

// trimPod drops the parts of a pod discovery never reads, to keep the
// informer cache small.
func trimPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	t := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	t.ManagedFields = nil
	t.Spec.ServiceAccountName = p.Spec.ServiceAccountName
	t.Spec.HostNetwork = p.Spec.HostNetwork
	t.Spec.NodeName = p.Spec.NodeName
	t.Spec.Containers = trimContainers(p.Spec.Containers)
	t.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	t.Status.Phase = p.Status.Phase
	t.Status.PodIP = p.Status.PodIP
	t.Status.PodIPs = p.Status.PodIPs
	return t, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Ports: c.Ports}
		for _, e := range c.Env {
			if e.Name == "WEFT_PROXY_INBOUND_ADDR" || e.Name == "LINKERD2_PROXY_INBOUND_LISTEN_ADDR" {
				out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			}
		}
	}
	return out
}
