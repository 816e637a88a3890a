package inbound

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

func TestRateLimitCheckDoesNotAllocateForAnAdmittedRequest(t *testing.T) {
	h := &HTTP{Log: slog.New(slog.DiscardHandler)} // refuses nothing here: no metrics needed
	const client = "client.shop.serviceaccount.identity.linkerd.cluster.local"
	res := &authz.Result{Decision: authz.Allow}
	info := &Conn{Peer: authz.Conn{TLS: true, Identity: client}}

	off := &Policy{Srv: &authz.Server{}}
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		if h.rateLimit(off, info, res) != nil {
			t.Fatal("refused without a limit")
		}
	}), "a port without a rate limit")

	// Limits high enough never to refuse in this loop.
	srv := &authz.Server{RateLimit: &authz.RateLimit{Total: 1 << 31, Identity: 1 << 31,
		Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 1 << 31, Identities: []string{"other.shop.serviceaccount.identity.linkerd.cluster.local"}}}}}
	lim, err := LimitFor(nil, srv, time.Now)
	require.NoError(t, err)
	on := &Policy{Srv: srv, Limit: lim}
	require.Nil(t, h.rateLimit(on, info, res), "the client's first request makes its bucket")
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		if h.rateLimit(on, info, res) != nil {
			t.Fatal("refused")
		}
	}), "a port with a rate limit, a client whose bucket exists")
}

func TestRateLimitUpdateKeepsTheBucketsOfTheSameLimits(t *testing.T) {
	limits := func(name string, total uint32, ids ...string) *authz.Server {
		rl := &authz.RateLimit{Meta: authz.Meta{Kind: "HTTPLocalRateLimitPolicy", Name: name}, Total: total, Identity: 1}
		if len(ids) > 0 {
			rl.Overrides = []authz.RateLimitOverride{{RequestsPerSecond: 1, Identities: ids}}
		}
		return &authz.Server{RateLimit: rl}
	}
	first, err := LimitFor(nil, limits("a", 5, "x"), time.Now)
	require.NoError(t, err)
	prev := &Policy{Limit: first}
	for _, c := range []struct {
		name string
		srv  *authz.Server
		same bool
	}{
		{"re-sent", limits("a", 5, "x"), true},
		{"renamed", limits("b", 5, "x"), true},
		{"another total", limits("a", 6, "x"), false},
		{"another override", limits("a", 5, "y"), false},
		{"no override", limits("a", 5), false},
	} {
		got, err := LimitFor(prev, c.srv, time.Now)
		require.NoError(t, err)
		assert.Equal(t, c.same, got.l == first.l, c.name)
		assert.Same(t, c.srv.RateLimit, got.rl, "%s: labels follow the new policy", c.name)
	}
	none, err := LimitFor(prev, &authz.Server{}, time.Now)
	require.NoError(t, err)
	assert.Nil(t, none, "no limit, no limiter")
}

// BenchmarkRateLimitCheck is the per-request work of the rate limit hook
// alone: a port without a limit, and one with a total and a per-identity
// limit (neither refusing), one client or clients of 64 identities
// from every CPU at once.
//
//	go test -run XXX -bench RateLimitCheck -benchmem ./mesh/dataplane/internal/inbound
func BenchmarkRateLimitCheck(b *testing.B) {
	h := &HTTP{Log: slog.New(slog.DiscardHandler)} // refuses nothing here: no metrics needed
	res := &authz.Result{Decision: authz.Allow}
	srv := &authz.Server{RateLimit: &authz.RateLimit{Total: 4e9, Identity: 4e9}}
	lim, err := LimitFor(nil, srv, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	var infos []*Conn
	for i := range 64 {
		infos = append(infos, &Conn{Peer: authz.Conn{TLS: true, Identity: fmt.Sprintf("client-%d.shop.serviceaccount.identity.linkerd.cluster.local", i)}})
	}
	for _, c := range []struct {
		name     string
		st       *Policy
		clients  int
		parallel bool
	}{
		{"no-limit", &Policy{Srv: &authz.Server{}}, 1, false},
		{"limit-one-client", &Policy{Srv: srv, Limit: lim}, 1, false},
		{"limit-64-clients-parallel", &Policy{Srv: srv, Limit: lim}, 64, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			if !c.parallel {
				for i := 0; b.Loop(); i++ {
					if h.rateLimit(c.st, infos[i%c.clients], res) != nil {
						b.Fatal("refused")
					}
				}
				return
			}
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				info := infos[int(next.Add(1))%c.clients]
				for pb.Next() {
					if h.rateLimit(c.st, info, res) != nil {
						b.Error("refused")
						return
					}
				}
			})
		})
	}
}
