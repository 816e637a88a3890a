package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/localca"
)

// SecretKeyPair extracts the issuer certificate and key from a Secret of
// type kubernetes.io/tls (tls.crt, tls.key) or linkerd.io/tls (crt.pem,
// key.pem). Other types are read by whichever pair of keys is present.
func SecretKeyPair(s *corev1.Secret) (certPEM, keyPEM []byte, err error) {
	if s == nil {
		return nil, nil, errors.New("kubernetes: no secret")
	}
	type layout struct{ cert, key string }
	linkerd := layout{vocab.IssuerCertLinkerd, vocab.IssuerKeyLinkerd}
	kube := layout{vocab.IssuerCertKubernetes, vocab.IssuerKeyKubernetes}
	order := []layout{linkerd, kube}
	if string(s.Type) == vocab.IssuerSchemeKubernetes {
		order = []layout{kube, linkerd}
	}
	for _, l := range order {
		c, okc := s.Data[l.cert]
		k, okk := s.Data[l.key]
		if okc && okk {
			return c, k, nil
		}
	}
	return nil, nil, fmt.Errorf("kubernetes: secret %s/%s (type %s) holds neither %s and %s nor %s and %s", s.Namespace, s.Name, s.Type,
		linkerd.cert, linkerd.key, kube.cert, kube.key)
}

// SecretIssuer is a localca.Issuer whose key pair lives in a Secret: an
// informer watches that one Secret and every change is checked and, when
// fit, swapped in without a restart (localca.Issuer.Reload). It is safe
// for concurrent use.
type SecretIssuer struct {
	*localca.Issuer
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// NewSecretIssuer loads the issuer key pair from the Secret
// namespace/name, checks it against bundle, and follows the Secret with an
// informer until Close. ctx bounds the start only (the wait for the
// informer's first sync); the informer runs until Close. Options are
// localca's: WithLogger, WithMetrics, WithClock.
func NewSecretIssuer(ctx context.Context, client k8s.Interface, namespace, name string, bundle identity.BundleSource, opts ...localca.Option) (*SecretIssuer, error) {
	if client == nil {
		return nil, errors.New("kubernetes: a Kubernetes client is required")
	}
	if bundle == nil {
		return nil, errors.New("kubernetes: a trust bundle is required")
	}
	source := "secret " + namespace + "/" + name
	factory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().Secrets()

	// Events that arrive before the first load is done are dropped: the
	// first load reads the informer's cache, which already holds them.
	var (
		mu sync.Mutex
		is *localca.Issuer
	)
	onChange := func(obj any) {
		if s, ok := obj.(*corev1.Secret); !ok || s.Name != name {
			return
		}
		mu.Lock()
		cur := is
		mu.Unlock()
		if cur != nil {
			_ = cur.Reload()
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
	}); err != nil {
		return nil, fmt.Errorf("kubernetes: watch %s: %w", source, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	si := &SecretIssuer{cancel: cancel, done: make(chan struct{})}
	factory.Start(runCtx.Done())
	go func() {
		defer close(si.done)
		<-runCtx.Done()
		factory.Shutdown()
	}()
	fail := func(err error) (*SecretIssuer, error) {
		_ = si.Close()
		return nil, err
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fail(fmt.Errorf("kubernetes: watch %s: %w", source, errors.Join(errors.New("informer did not sync"), ctx.Err())))
	}
	load := func() ([]byte, []byte, error) {
		s, err := inf.Lister().Secrets(namespace).Get(name)
		if err != nil {
			return nil, nil, err
		}
		return SecretKeyPair(s)
	}
	first, err := localca.NewFromLoader(ctx, source, load, bundle, opts...)
	if err != nil {
		return fail(err)
	}
	mu.Lock()
	is = first
	mu.Unlock()
	si.Issuer = first
	// A change that landed between the first load and the line above was
	// dropped by onChange; reading once more picks it up (the same pair
	// again changes nothing).
	_ = first.Reload()
	return si, nil
}

// Close stops watching the Secret. It is safe to call more than once.
func (si *SecretIssuer) Close() error {
	si.once.Do(func() {
		si.cancel()
		<-si.done
	})
	return nil
}

var (
	_ identity.Issuer         = (*SecretIssuer)(nil)
	_ identity.ExpiryReporter = (*SecretIssuer)(nil)
)
