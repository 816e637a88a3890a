package meshstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/meta"
)

var errNotFound = errors.New("not found")

// staticSource answers the value of each key it holds, once, and keeps
// the watch open until its context ends; other keys are not found.
type staticSource[T any] map[string]T

func (s staticSource[T]) Watch(ctx context.Context, key string) (<-chan T, error) {
	v, ok := s[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNotFound, key)
	}
	ch := make(chan T, 1)
	ch <- v
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}

// profileSource answers each name's profile once.
type profileSource = staticSource[*pdst.DestinationProfile]

func serviceProfile(fqn, kind, name, ns string, port uint32) *pdst.DestinationProfile {
	return &pdst.DestinationProfile{
		FullyQualifiedName: fqn,
		ParentRef: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: "core", Kind: kind, Name: name, Namespace: ns, Port: port,
		}}},
	}
}

func TestCanonicalNameIsTheServiceDiscoveryNames(t *testing.T) {
	const fqn = "web.shop.svc.cluster.local"
	assert.Equal(t, fqn+":8080", canonicalName(serviceProfile(fqn, "Service", "web", "shop", 8080), "10.96.0.10:8080"))
	assert.Equal(t, fqn+":8080", canonicalName(serviceProfile("Web.Shop.svc.cluster.local.", "Service", "web", "shop", 8080), "x"),
		"case and the trailing dot do not make another name")
	assert.Equal(t, fqn+":9090", canonicalName(serviceProfile(fqn, "Service", "web", "shop", 0), "10.96.0.10:9090"),
		"the target's port when the parent has none")
	for what, p := range map[string]*pdst.DestinationProfile{
		"no profile":                     nil,
		"no parent":                      {FullyQualifiedName: fqn},
		"a parent that is no Service":    serviceProfile(fqn, "Pod", "web", "shop", 8080),
		"a name of another Service":      serviceProfile("api.shop.svc.cluster.local", "Service", "web", "shop", 8080),
		"a name in another namespace":    serviceProfile("web.other.svc.cluster.local", "Service", "web", "shop", 8080),
		"a name that is no Service name": serviceProfile("web.shop.example.org", "Service", "web", "shop", 8080),
		"no name":                        serviceProfile("", "Service", "web", "shop", 8080),
		"no port at all":                 serviceProfile(fqn, "Service", "web", "shop", 0),
		"a port out of range":            serviceProfile(fqn, "Service", "web", "shop", 70000),
	} {
		assert.Empty(t, canonicalName(p, "10.96.0.10"), what)
	}
}

func TestParseCanonicalAcceptsOnlyServiceNamesWithAPort(t *testing.T) {
	svc, ns, ok := parseCanonical("web.shop.svc.cluster.local:8080")
	assert.True(t, ok)
	assert.Equal(t, "web", svc)
	assert.Equal(t, "shop", ns)
	for _, bad := range []string{
		"", "web.shop.svc.cluster.local", "web.shop.svc.cluster.local:0", "web.shop.svc.cluster.local:65536",
		"web.shop.svc.cluster.local:08080", "web.shop.svc.cluster.local:80:80", "web.shop.svc:80", "web.shop.pod.cluster.local:80",
		"Web.shop.svc.cluster.local:80", "web_x.shop.svc.cluster.local:80", "web..svc.cluster.local:80", "-web.shop.svc.cluster.local:80",
		"10.96.0.10:80", strings.Repeat("a.", 127) + "svc.cluster.local:80",
	} {
		_, _, ok := parseCanonical(bad)
		assert.False(t, ok, bad)
	}
}

func TestInboundProfilesFollowABoundedNumberOfNames(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := profileSource{}
	name := func(i int) string { return fmt.Sprintf("s%d.shop.svc.cluster.local:80", i) }
	for i := 0; i <= maxInboundProfiles; i++ {
		src[name(i)] = serviceProfile(fmt.Sprintf("s%d.shop.svc.cluster.local", i), "Service", fmt.Sprintf("s%d", i), "shop", 80)
	}
	st := New(Settings{Profiles: src, Lifetime: func() context.Context { return ctx }, ResolveTimeout: 10 * time.Second,
		NotFound: errNotFound, Log: slog.New(slog.DiscardHandler)})
	ps := st.inProfiles
	for i := 0; i < maxInboundProfiles; i++ {
		st := ps.lookup(ctx, name(i))
		require.NotNil(t, st, name(i))
		assert.True(t, st.known, name(i))
	}
	assert.Nil(t, ps.lookup(ctx, name(maxInboundProfiles)), "past the bound a new name gets no profile")
	assert.True(t, ps.lookup(ctx, name(0)).known, "a followed name still answers")
	unknown := ps.lookup(ctx, "nosuch.shop.svc.cluster.local:80")
	assert.Nil(t, unknown, "the bound holds for names discovery does not know either")
	ps.mu.RLock()
	assert.Len(t, ps.m, maxInboundProfiles)
	ps.mu.RUnlock()

	// Names that are not of the canonical form are never asked about.
	fresh := New(st.s).inProfiles
	for _, bad := range []string{"", "web", "10.96.0.10:80", "WEB.shop.svc.cluster.local:80", "web.shop.svc.cluster.local"} {
		assert.Nil(t, fresh.lookup(ctx, bad), bad)
	}
	assert.Empty(t, fresh.m)
	// A name discovery does not know is followed, but not known.
	nosuch := fresh.lookup(ctx, "nosuch.shop.svc.cluster.local:80")
	require.NotNil(t, nosuch)
	assert.False(t, nosuch.known)
}
