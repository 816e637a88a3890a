package ratelimit_test

import (
	"fmt"
	"testing"

	"github.com/weftmesh/weft/mesh/dataplane/internal/ratelimit"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// BenchmarkAllow measures one request's check with the real clock, with
// limits high enough that every request is admitted (the common case).
// Results: docs/benchmarks.md and the notes of the change.
func BenchmarkAllow(b *testing.B) {
	const high = 1 << 30
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("client-%d.ns.serviceaccount.identity.weft.cluster.local", i)
	}
	for _, bc := range []struct {
		name string
		rl   *authz.RateLimit
		id   func(i int) string
	}{
		{"none", nil, func(int) string { return ids[0] }},
		{"total", &authz.RateLimit{Total: high}, func(int) string { return ids[0] }},
		{"total+identity", &authz.RateLimit{Total: high, Identity: high}, func(i int) string { return ids[i%len(ids)] }},
		{"override", &authz.RateLimit{Total: high, Identity: high,
			Overrides: []authz.RateLimitOverride{{RequestsPerSecond: high, Identities: ids[:1]}}}, func(int) string { return ids[0] }},
		{"unmeshed", &authz.RateLimit{Total: high, Identity: high}, func(int) string { return "" }},
	} {
		l, err := ratelimit.New(bc.rl)
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			l.Allow(id)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !l.Allow(bc.id(i)).Allowed {
					b.Fatal("refused")
				}
				i++
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					l.Allow(bc.id(i))
					i++
				}
			})
		})
	}
}
