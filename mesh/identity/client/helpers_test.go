package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
)

// fakeClock is a manual clock: After registers a waiter that fires when
// Advance moves the time past its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	added   chan struct{}
}

type waiter struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Now().Truncate(time.Second), added: make(chan struct{}, 100)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), d: d, ch: make(chan time.Time, 1)}
	f.waiters = append(f.waiters, w)
	select {
	case f.added <- struct{}{}:
	default:
	}
	return w.ch
}

// Advance moves the clock forward and fires every waiter that is due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// NextWaiter blocks until some goroutine waits on the clock and returns
// the pending waiter registered last.
func (f *fakeClock) NextWaiter(t testing.TB) *waiter {
	t.Helper()
	for {
		f.mu.Lock()
		if n := len(f.waiters); n > 0 {
			w := f.waiters[n-1]
			f.mu.Unlock()
			return w
		}
		f.mu.Unlock()
		select {
		case <-f.added:
		case <-time.After(testutil.DefaultTimeout):
			t.Fatal("nobody waited on the clock")
		}
	}
}

// switchable is a Certifier that can be taken down and counts calls.
type switchable struct {
	inner client.Certifier
	down  atomic.Bool
	calls atomic.Int32
}

func (s *switchable) Certify(ctx context.Context, req identity.Request) (*identity.Issued, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, identity.ErrUnavailable
	}
	return s.inner.Certify(ctx, req)
}

type mesh struct {
	anchor  *testutil.CA
	issuer  *testutil.CA
	bundle  *identity.Bundle
	service *identity.Service
}

var tokens = identity.Tokens{
	"web-token": {Namespace: "shop", Name: "web"},
	"db-token":  {Namespace: "shop", Name: "db"},
}

func newMesh(t testing.TB, opts ...identity.Option) mesh {
	t.Helper()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root", Lifetime: 365 * 24 * time.Hour})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity", Lifetime: 30 * 24 * time.Hour})
	bundle, err := identity.ParseBundle(testutil.BundlePEM(anchor))
	require.NoError(t, err)
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	require.NoError(t, err)
	svc, err := identity.NewService(context.Background(), tokens, ca, opts...)
	require.NoError(t, err)
	return mesh{anchor: anchor, issuer: issuer, bundle: bundle, service: svc}
}

func name(t testing.TB, sa string) identity.Name {
	t.Helper()
	n, err := identity.DefaultDomain().Name("shop", sa)
	require.NoError(t, err)
	return n
}

func token(s string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(s), nil }
}
