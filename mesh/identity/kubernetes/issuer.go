package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/weftmesh/weft/mesh/identity"
)

// SecretKeyPair extracts the issuer certificate and key from a Secret of
// type kubernetes.io/tls (tls.crt, tls.key) or linkerd.io/tls (crt.pem,
// key.pem). Other types are read by whichever pair of keys is present.
func SecretKeyPair(s *corev1.Secret) (certPEM, keyPEM []byte, err error) {
	if s == nil {
		return nil, nil, errors.New("local: no secret")
	}
	order := []string{SchemeLinkerd, SchemeKubernetes}
	if string(s.Type) == SchemeKubernetes {
		order = []string{SchemeKubernetes, SchemeLinkerd}
	}
	for _, scheme := range order {
		n := layouts[scheme]
		c, okc := s.Data[n[0]]
		k, okk := s.Data[n[1]]
		if okc && okk {
			return c, k, nil
		}
	}
	return nil, nil, fmt.Errorf("local: secret %s/%s (type %s) holds neither crt.pem and key.pem nor tls.crt and tls.key", s.Namespace, s.Name, s.Type)
}

// NewFromSecret loads the issuer key pair from the Secret namespace/name,
// checks it against bundle, and follows the Secret with an informer until
// Close. It waits for the informer's first sync, bounded by ctx.
func NewFromSecret(ctx context.Context, client k8s.Interface, namespace, name string, bundle identity.BundleSource, opts ...Option) (*Issuer, error) {
	if client == nil {
		return nil, errors.New("local: a Kubernetes client is required")
	}
	if bundle == nil {
		return nil, errors.New("local: a trust bundle is required")
	}
	cfg := newConfig(opts)
	is := &Issuer{cfg: cfg, bundle: bundle, source: "secret " + namespace + "/" + name}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().Secrets()
	runCtx, cancel := context.WithCancel(context.Background())
	is.cancel, is.done = cancel, make(chan struct{})

	onChange := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != name || is.ca.Load() == nil {
			return
		}
		crt, key, err := SecretKeyPair(s)
		if err != nil {
			is.cfg.metrics.IssuerReloads.With("result", "error").Add(1)
			is.cfg.logger.Error("issuer reload failed; keeping the previous issuer", "source", is.source, "error", err)
			return
		}
		is.reload(fileResult{path: is.source, data: crt}, fileResult{path: is.source, data: key})
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("local: watch %s: %w", is.source, err)
	}
	factory.Start(runCtx.Done())
	go func() {
		defer close(is.done)
		<-runCtx.Done()
		factory.Shutdown()
	}()
	fail := func(err error) (*Issuer, error) {
		_ = is.Close()
		return nil, err
	}
	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) }()
	if !<-synced {
		return fail(fmt.Errorf("local: watch %s: %w", is.source, errors.Join(errors.New("informer did not sync"), ctx.Err())))
	}
	s, err := inf.Lister().Secrets(namespace).Get(name)
	if err != nil {
		return fail(fmt.Errorf("local: %s: %w", is.source, err))
	}
	crt, key, err := SecretKeyPair(s)
	if err != nil {
		return fail(err)
	}
	ca, err := is.build(fileResult{path: is.source, data: crt}, fileResult{path: is.source, data: key})
	if err != nil {
		return fail(err)
	}
	is.install(ca, "loaded")
	return is, nil
}
