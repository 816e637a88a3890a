package meshstate

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// booksProfile is web's ServiceProfile (its canonical name
// web.shop.svc.cluster.local:PORT) with one route, "books", for paths
// /books/N, whose 5xx are failures.
func booksProfile(port uint32) *pdst.DestinationProfile {
	p := serviceProfile(webFQN, "Service", "web", "shop", port)
	p.Routes = []*pdst.Route{{
		Condition:     &pdst.RequestMatch{Match: &pdst.RequestMatch_Path{Path: &pdst.PathMatch{Regex: "/books/[0-9]+"}}},
		MetricsLabels: map[string]string{"route": "books"},
		ResponseClasses: []*pdst.ResponseClass{{
			Condition: &pdst.ResponseMatch{Match: &pdst.ResponseMatch_Status{Status: &pdst.HttpStatusRange{Min: 500, Max: 599}}},
			IsFailure: true,
		}},
	}}
	return p
}

// unreadableProfile is a profile route.Compile refuses: a route without
// a condition (route's TestCompileRefusesWhatItCannotFullyRead).
func unreadableProfile(port uint32) *pdst.DestinationProfile {
	p := serviceProfile(webFQN, "Service", "web", "shop", port)
	p.Routes = []*pdst.Route{{MetricsLabels: map[string]string{"route": "broken"}}}
	return p
}

func booksRoute(r *route.Router) *route.Route {
	return r.Select(route.Request{Method: "GET", Path: "/books/12", Host: webFQN, Header: http.Header{}})
}

// A profile the router cannot compile is not applied and a broken
// profile watch keeps the last profile, as for policies; a profile's
// retry budget replaces the Service's only when it differs.
func TestAProfileTheRouterCannotCompileIsNotApplied(t *testing.T) {
	pros := newSource[string, *pdst.DestinationProfile](t)
	h := newHarness(t, Settings{Profiles: pros})
	d := h.fixed(t, target)
	res := h.serviceAsync(d)

	c := pros.next(t)
	st := c.open()
	good := booksProfile(80)
	good.RetryBudget = &pdst.RetryBudget{RetryRatio: 0.5, MinRetriesPerSecond: 3, Ttl: durationpb.New(10e9)}
	st.send(t, good)
	svc := await(t, res, "the first profile")
	r1, b1 := svc.Router(), svc.Budget()
	assert.Equal(t, "books", booksRoute(r1).Name)
	assert.Equal(t, 0.5, r1.Budget.Ratio)

	st.send(t, unreadableProfile(80))
	same := booksProfile(80)
	same.RetryBudget = good.RetryBudget
	st.send(t, same)
	st.close() // the watch breaks
	c = pros.next(t)
	assert.Equal(t, "books", booksRoute(svc.Router()).Name, "the profile after the refused one is applied")
	assert.NotSame(t, r1, svc.Router(), "a new router for the new profile")
	assert.Same(t, b1, svc.Budget(), "the same budget keeps its state")

	r2 := svc.Router()
	c = c.settle(t, unreadableProfile(80))
	assert.Same(t, r2, svc.Router(), "a refused profile keeps the last router")
	c.settle(t) // a stream that breaks before any answer
	assert.Same(t, r2, svc.Router(), "a broken profile watch keeps the last profile")
	assert.Equal(t, "books", booksRoute(svc.Router()).Name)
	assert.Equal(t, webFQN+":80", svc.Names().Canonical)
}

// The inbound profiles of the names peers send: a name is believed only
// when discovery says it is that Service's, and then labels the request
// and selects the profile's route.
func TestInboundRouteBelievesOnlyWhatDiscoverySays(t *testing.T) {
	const name = webFQN + ":8080"
	src := profileSource{
		name: booksProfile(8080),
		// Discovery knows the name, but as another Service's.
		"api.shop.svc.cluster.local:8080": booksProfile(8080),
		// A Service with no routes.
		"plain.shop.svc.cluster.local:80": serviceProfile("plain.shop.svc.cluster.local", "Service", "plain", "shop", 80),
	}
	h := newHarness(t, Settings{Profiles: src})

	dst, rt, classes := h.st.InboundRoute(h.ctx, name, "GET", "/books/12")
	assert.Equal(t, name, dst, "the name discovery confirms labels the request")
	assert.Equal(t, "books", rt)
	require.Len(t, classes, 1)
	assert.True(t, route.Failure(classes, 503, ""), "the route's response classes")

	dst, rt, classes = h.st.InboundRoute(h.ctx, name, "GET", "/other")
	assert.Equal(t, name, dst)
	assert.Equal(t, route.DefaultName, rt, "a request no route matches")
	assert.Nil(t, classes)

	for what, n := range map[string]string{
		"a name discovery gives another Service's profile": "api.shop.svc.cluster.local:8080",
		"a name discovery does not know":                   "nosuch.shop.svc.cluster.local:8080",
		"a name not of the canonical form":                 "web.shop:8080",
	} {
		dst, rt, classes := h.st.InboundRoute(h.ctx, n, "GET", "/books/12")
		assert.Empty(t, dst, what)
		assert.Equal(t, route.DefaultName, rt, what)
		assert.Nil(t, classes, what)
	}

	dst, rt, _ = h.st.InboundRoute(h.ctx, "plain.shop.svc.cluster.local:80", "GET", "/books/12")
	assert.Equal(t, "plain.shop.svc.cluster.local:80", dst, "a Service without routes is still named")
	assert.Equal(t, route.DefaultName, rt)
}

// An inbound profile the router cannot compile keeps the last routes.
func TestARefusedInboundProfileKeepsTheLastRoutes(t *testing.T) {
	const name = webFQN + ":8080"
	pros := newSource[string, *pdst.DestinationProfile](t)
	h := newHarness(t, Settings{Profiles: pros})
	type answer struct{ dst, rt string }
	first := make(chan answer, 1)
	go func() {
		dst, rt, _ := h.st.InboundRoute(h.ctx, name, "GET", "/books/12")
		first <- answer{dst, rt}
	}()
	c := pros.next(t)
	require.Equal(t, name, c.key)
	st := c.open()
	st.send(t, booksProfile(8080))
	a := <-first
	assert.Equal(t, answer{name, "books"}, a)

	st.send(t, unreadableProfile(8080))
	st.close()
	pros.next(t)
	dst, rt, _ := h.st.InboundRoute(context.Background(), name, "GET", "/books/12")
	assert.Equal(t, name, dst)
	assert.Equal(t, "books", rt, "a refused inbound profile keeps the last routes")
}

// A refused profile is not applied at all: the name it gives the target
// (the route series' dst, l5d-dst-canonical) stays the last good
// profile's, like its routes.
func TestARefusedProfileKeepsTheLastCanonicalName(t *testing.T) {
	pros := newSource[string, *pdst.DestinationProfile](t)
	h := newHarness(t, Settings{Profiles: pros})
	d := h.fixed(t, target)
	res := h.serviceAsync(d)
	c := pros.next(t)
	st := c.open()
	st.send(t, booksProfile(80))
	svc := await(t, res, "the first profile")
	require.Equal(t, webFQN+":80", svc.Names().Canonical)
	dst := svc.names.Load().dst

	other := serviceProfile("api.shop.svc.cluster.local", "Service", "api", "shop", 80)
	other.Routes = []*pdst.Route{{MetricsLabels: map[string]string{"route": "broken"}}} // no condition: refused
	st.send(t, other)
	st.close()
	pros.next(t)
	assert.Equal(t, "books", booksRoute(svc.Router()).Name, "the refused profile's routes are not applied")
	assert.Equal(t, webFQN+":80", svc.Names().Canonical, "nor is the name it gives the target")
	assert.Equal(t, dst, svc.names.Load().dst, "the route series keep their dst")
}
