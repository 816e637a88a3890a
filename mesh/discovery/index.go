package discovery

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// Source is what the Destination server reads: live, shared views of a
// destination's endpoints and profile. Index is the implementation fed
// with Kubernetes objects (by the kubernetes and static sources, or
// directly); other service registries can implement Source with Topic.
type Source interface {
	// SubscribeEndpoints watches the endpoints of a destination path. An
	// error wrapping ErrInvalidTarget means the path is malformed.
	SubscribeEndpoints(path string) (*Subscription[*EndpointSnapshot], error)
	// SubscribeProfile watches the profile of a destination path as seen
	// by the client the token describes.
	SubscribeProfile(path string, token ContextToken) (*Subscription[*ProfileSnapshot], error)
}

// ErrClosed is returned by an Index after Close.
var ErrClosed = errors.New("discovery: index closed")

// Index holds the Kubernetes objects discovery reads (Services,
// EndpointSlices, Pods, Namespaces, ServiceProfiles), translates them into
// endpoint sets and profiles, and fans them out: one topic per watched
// destination, shared by all its subscribers, recomputed only when an
// object it depends on changes, and dropped when its last subscriber
// leaves.
//
// Feed it with Upsert, Delete and Replace; read it through Source. The
// index keeps the objects it is given: callers must not modify them
// afterwards. It is safe for concurrent use.
type Index struct {
	cfg config

	mu        sync.Mutex
	closed    bool
	c         *cluster
	endpoints map[string]*endpointTopic
	profiles  map[profileTopicKey]*profileTopic
}

type endpointTopic struct {
	target Target
	dep    dependency
	topic  *Topic[*EndpointSnapshot]
}

type profileTopicKey struct {
	target string
	token  ContextToken
}

type profileTopic struct {
	target Target
	token  ContextToken
	dep    dependency
	topic  *Topic[*ProfileSnapshot]
}

// NewIndex returns an empty index. Options: WithClusterDomain,
// WithControlPlaneNamespace, WithTrustDomain, WithDefaultOpaquePorts,
// WithH2Upgrade, WithLogger, WithMetrics.
func NewIndex(opts ...Option) (*Index, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Index{
		cfg:       cfg,
		c:         newCluster(),
		endpoints: map[string]*endpointTopic{},
		profiles:  map[profileTopicKey]*profileTopic{},
	}, nil
}

// ClusterDomain returns the cluster domain the index resolves names in.
func (x *Index) ClusterDomain() string { return x.cfg.clusterDomain }

// Upsert adds or replaces objects. Either all are applied or, when one is
// not supported or lacks a name or namespace, none is and the error says
// which.
func (x *Index) Upsert(objs ...runtime.Object) error { return x.update(objs, false) }

// Delete removes objects; only their kind, namespace and name are read.
// Deleting an unknown object is not an error.
func (x *Index) Delete(objs ...runtime.Object) error { return x.update(objs, true) }

func (x *Index) update(objs []runtime.Object, deleted bool) error {
	for i, o := range objs {
		if err := validateObject(o); err != nil {
			x.reject(o)
			return fmt.Errorf("%w (object %d of %d)", err, i+1, len(objs))
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	t := newTouched()
	for _, o := range objs {
		x.c.apply(o, deleted, t)
	}
	x.refresh(t)
	return nil
}

// Replace makes objs the whole content of the index, as after a reload of
// files. Either all are applied or none is.
func (x *Index) Replace(objs []runtime.Object) error {
	for i, o := range objs {
		if err := validateObject(o); err != nil {
			x.reject(o)
			return fmt.Errorf("%w (object %d of %d)", err, i+1, len(objs))
		}
	}
	c := newCluster()
	t := newTouched()
	for _, o := range objs {
		c.apply(o, false, t)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	x.c = c
	x.refresh(&touched{all: true})
	return nil
}

func (x *Index) reject(o runtime.Object) {
	kind, err := kindOf(o)
	if err != nil {
		kind = fmt.Sprintf("%T", o)
	}
	x.cfg.metrics.Rejected.With("kind", kind).Add(1)
}

// refresh recomputes the topics that depend on what t touched and
// publishes those that changed. x.mu is held.
func (x *Index) refresh(t *touched) {
	if t.empty() {
		return
	}
	for _, et := range x.endpoints {
		if !et.dep.affectedBy(t) {
			continue
		}
		set, dep := x.c.endpoints(et.target, &x.cfg)
		et.dep = dep
		if snap, changed := NextEndpointSnapshot(et.topic.Latest(), set); changed {
			et.topic.Publish(snap)
			x.cfg.metrics.Snapshots.With("kind", "endpoints").Add(1)
		}
	}
	for _, pt := range x.profiles {
		if !pt.dep.affectedBy(t) {
			continue
		}
		p, dep := x.computeProfile(pt.target, pt.token)
		pt.dep = dep
		if snap, changed := NextProfileSnapshot(pt.topic.Latest(), p); changed {
			pt.topic.Publish(snap)
			x.cfg.metrics.Snapshots.With("kind", "profile").Add(1)
		}
	}
}

func (x *Index) computeProfile(t Target, tok ContextToken) (Profile, dependency) {
	p, dep, err := x.c.profile(t, tok, &x.cfg)
	if err != nil {
		x.cfg.logger.Warn("discovery: ignoring invalid ServiceProfile; serving the default profile", "target", t.String(), "error", err)
		x.cfg.metrics.Rejected.With("kind", "ServiceProfile").Add(1)
	}
	return p, dep
}

// SubscribeEndpoints implements Source.
func (x *Index) SubscribeEndpoints(path string) (*Subscription[*EndpointSnapshot], error) {
	t, err := ParseTarget(path, x.cfg.clusterDomain)
	if err != nil {
		return nil, err
	}
	key := t.String()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, ErrClosed
	}
	et := x.endpoints[key]
	if et == nil {
		set, dep := x.c.endpoints(t, &x.cfg)
		snap, _ := NextEndpointSnapshot(nil, set)
		et = &endpointTopic{target: t, dep: dep}
		et.topic = NewTopic(snap, func() { x.dropEndpoints(key, et) })
		x.endpoints[key] = et
		x.cfg.metrics.Topics.With("kind", "endpoints").Add(1)
	}
	return et.topic.Subscribe(), nil
}

// SubscribeProfile implements Source.
func (x *Index) SubscribeProfile(path string, token ContextToken) (*Subscription[*ProfileSnapshot], error) {
	t, err := ParseTarget(path, x.cfg.clusterDomain)
	if err != nil {
		return nil, err
	}
	key := profileTopicKey{target: t.String(), token: ContextToken{Namespace: token.Namespace}}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, ErrClosed
	}
	pt := x.profiles[key]
	if pt == nil {
		p, dep := x.computeProfile(t, key.token)
		snap, _ := NextProfileSnapshot(nil, p)
		pt = &profileTopic{target: t, token: key.token, dep: dep}
		pt.topic = NewTopic(snap, func() { x.dropProfile(key, pt) })
		x.profiles[key] = pt
		x.cfg.metrics.Topics.With("kind", "profile").Add(1)
	}
	return pt.topic.Subscribe(), nil
}

func (x *Index) dropEndpoints(key string, et *endpointTopic) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.endpoints[key] == et && et.topic.Len() == 0 {
		delete(x.endpoints, key)
		et.topic.Close()
		x.cfg.metrics.Topics.With("kind", "endpoints").Add(-1)
	}
}

func (x *Index) dropProfile(key profileTopicKey, pt *profileTopic) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.profiles[key] == pt && pt.topic.Len() == 0 {
		delete(x.profiles, key)
		pt.topic.Close()
		x.cfg.metrics.Topics.With("kind", "profile").Add(-1)
	}
}

// IndexStats counts what an index holds.
type IndexStats struct {
	// EndpointTopics and ProfileTopics count shared watches.
	EndpointTopics, ProfileTopics int
	// Subscriptions counts subscribers over all topics.
	Subscriptions int
	// Objects counts stored objects by kind.
	Objects map[string]int
}

// Stats reports what the index holds, for diagnostics and tests.
func (x *Index) Stats() IndexStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := IndexStats{
		EndpointTopics: len(x.endpoints),
		ProfileTopics:  len(x.profiles),
		Objects: map[string]int{
			"Service":        len(x.c.services),
			"EndpointSlice":  len(x.c.slices),
			"Pod":            len(x.c.pods),
			"Namespace":      len(x.c.namespaces),
			"ServiceProfile": len(x.c.profiles),
		},
	}
	for _, et := range x.endpoints {
		s.Subscriptions += et.topic.Len()
	}
	for _, pt := range x.profiles {
		s.Subscriptions += pt.topic.Len()
	}
	return s
}

// Close ends every subscription (their Done channels close) and makes
// the index refuse further use. It is idempotent.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	for k, et := range x.endpoints {
		et.topic.Close()
		delete(x.endpoints, k)
	}
	for k, pt := range x.profiles {
		pt.topic.Close()
		delete(x.profiles, k)
	}
	return nil
}

// ResolveEndpoints computes, without any server or watch, the endpoint set
// a subscriber to path would receive given objs. It is the translation
// core as a pure function, for tests and tools.
func ResolveEndpoints(objs []runtime.Object, path string, opts ...Option) (EndpointSet, error) {
	x, err := NewIndex(opts...)
	if err != nil {
		return EndpointSet{}, err
	}
	if err := x.Replace(objs); err != nil {
		return EndpointSet{}, err
	}
	t, err := ParseTarget(path, x.cfg.clusterDomain)
	if err != nil {
		return EndpointSet{}, err
	}
	set, _ := x.c.endpoints(t, &x.cfg)
	if !set.Exists {
		set = EndpointSet{}
	}
	return set, nil
}

// ResolveProfile computes the profile a client in token's namespace would
// receive for path given objs. An invalid ServiceProfile is an error here
// (a server would log it and serve the default profile).
func ResolveProfile(objs []runtime.Object, path string, token ContextToken, opts ...Option) (Profile, error) {
	x, err := NewIndex(opts...)
	if err != nil {
		return Profile{}, err
	}
	if err := x.Replace(objs); err != nil {
		return Profile{}, err
	}
	t, err := ParseTarget(path, x.cfg.clusterDomain)
	if err != nil {
		return Profile{}, err
	}
	p, _, err := x.c.profile(t, token, &x.cfg)
	return p, err
}

// Object returns the stored object of kind (Service, EndpointSlice, Pod,
// Namespace, ServiceProfile) with that namespace and name, for
// diagnostics. Namespaces have no namespace.
func (x *Index) Object(kind, namespace, name string) (runtime.Object, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := objKey{namespace, name}
	var o runtime.Object
	switch kind {
	case "Service":
		if v := x.c.services[k]; v != nil {
			o = v
		}
	case "EndpointSlice":
		if v := x.c.slices[k]; v != nil {
			o = v
		}
	case "Pod":
		if v := x.c.pods[k]; v != nil {
			o = v
		}
	case "Namespace":
		if v := x.c.namespaces[name]; v != nil {
			o = v
		}
	case "ServiceProfile":
		if v := x.c.profiles[k]; v != nil {
			o = v
		}
	}
	return o, o != nil
}
