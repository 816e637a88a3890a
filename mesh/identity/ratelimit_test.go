package identity_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// certifier sends Certify calls for one service account.
type certifier struct {
	client pb.IdentityClient
	req    *pb.CertifyRequest
}

func newCertifier(t testing.TB, client pb.IdentityClient, ns, sa, token string) certifier {
	t.Helper()
	name := mustName(t, ns, sa).String()
	csr := testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name)
	return certifier{client, &pb.CertifyRequest{Identity: name, Token: []byte(token), CertificateSigningRequest: csr}}
}

func (c certifier) certify(ctx context.Context) error {
	_, err := c.client.Certify(ctx, c.req)
	return err
}

// TestCertifyCallsUnderOneIdentityAreRateLimitedAndAnotherIdentityIsNot
// is the regression test of issue 13 (one token got 4,010 certificates in
// 3 s): a flood of concurrent calls under one token gets exactly the burst,
// the rest RESOURCE_EXHAUSTED with a message naming the identity and the
// limit, and nothing more reaches the issuer; another identity is not
// affected; time refills the bucket at the configured rate.
func TestCertifyCallsUnderOneIdentityAreRateLimitedAndAnotherIdentityIsNot(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	counting := &countingIssuer{CA: p.ca}
	clock := newFakeClock()
	svc, err := identity.NewService(ctx, webTokens, counting,
		identity.WithClock(clock.Now), identity.WithRateLimit(identity.RateLimit{Burst: 20, PerSecond: 2}))
	require.NoError(t, err)
	client := serve(t, svc)
	web := newCertifier(t, client, "shop", "web", "web-token")
	admin := newCertifier(t, client, "shop", "admin", "admin-token")

	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 10 {
				err := web.certify(ctx)
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.ResourceExhausted:
					limited.Add(1)
					msg := status.Convert(err).Message()
					assert.Contains(t, msg, "too many certificate requests for web.shop.serviceaccount.identity.weft.cluster.local")
					assert.Contains(t, msg, "limit: 20 at once, then 2 per second")
					assert.Contains(t, msg, "retry in 500ms")
				default:
					t.Errorf("unexpected answer: %v", err)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(20), ok.Load(), "the burst")
	assert.Equal(t, int32(80), limited.Load())
	assert.Equal(t, int32(20), counting.n.Load(), "refused calls never reach the issuer")

	// Another identity has its own budget.
	for i := range 20 {
		require.NoError(t, admin.certify(ctx), "admin call %d", i)
	}
	assert.Equal(t, codes.ResourceExhausted, status.Code(admin.certify(ctx)))

	// Half a second gives web one more call, not two.
	clock.Advance(500 * time.Millisecond)
	require.NoError(t, web.certify(ctx))
	assert.Equal(t, codes.ResourceExhausted, status.Code(web.certify(ctx)))
	// Ten seconds (a restart loop's shortest backoff) give it 20: full again.
	clock.Advance(10 * time.Second)
	for i := range 20 {
		require.NoError(t, web.certify(ctx), "after the refill, call %d", i)
	}
	assert.Equal(t, codes.ResourceExhausted, status.Code(web.certify(ctx)))
}

// TestTheLimitIsChargedToTheIdentityTheTokenProves: a token for admin
// asking for web's name spends admin's budget, never web's.
func TestTheLimitIsChargedToTheIdentityTheTokenProves(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	svc, err := identity.NewService(ctx, webTokens, p.ca,
		identity.WithClock(newFakeClock().Now), identity.WithRateLimit(identity.RateLimit{Burst: 2, PerSecond: 1}))
	require.NoError(t, err)
	client := serve(t, svc)
	web := newCertifier(t, client, "shop", "web", "web-token")
	forged := web
	forged.req = &pb.CertifyRequest{Identity: web.req.Identity, Token: []byte("admin-token"), CertificateSigningRequest: web.req.CertificateSigningRequest}

	for range 2 {
		assert.Equal(t, codes.FailedPrecondition, status.Code(forged.certify(ctx)))
	}
	assert.Equal(t, codes.ResourceExhausted, status.Code(forged.certify(ctx)), "admin's budget is spent")
	for range 2 {
		require.NoError(t, web.certify(ctx), "web's budget is untouched")
	}
}

// TestDefaultRateLimitAdmitsARolloutOf1000PodsAtOnce: 1,000 pods of one
// service account starting in the same instant all get certificates; the
// 1,001st waits 100 ms; a pod restarting 10 s later gets one.
func TestDefaultRateLimitAdmitsARolloutOf1000PodsAtOnce(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPKI(t)
	clock := newFakeClock()
	svc, err := identity.NewService(ctx, webTokens, p.ca, identity.WithClock(clock.Now))
	require.NoError(t, err)
	name := mustName(t, "shop", "web").String()
	req := identity.Request{Identity: name, Token: []byte("web-token"), CSR: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name)}

	for i := range identity.DefaultRateLimit.Burst {
		_, err := svc.Certify(ctx, req)
		require.NoError(t, err, "pod %d", i)
	}
	_, err = svc.Certify(ctx, req)
	require.ErrorIs(t, err, identity.ErrRateLimited)
	assert.Contains(t, err.Error(), "retry in 100ms")
	clock.Advance(10 * time.Second)
	_, err = svc.Certify(ctx, req)
	require.NoError(t, err, "a restarted pod")
}

// TestAHalfSentCertifyRequestHitsTheDeadline: on a plain grpc.Server (no
// server-wide limits), a client that sends the headers and part of a
// Certify request, then nothing, is answered DEADLINE_EXCEEDED at the
// service's request timeout; so is one that never sends the request.
func TestAHalfSentCertifyRequestHitsTheDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	svc, err := identity.NewService(ctx, webTokens, p.ca, identity.WithRequestTimeout(timeout))
	require.NoError(t, err)
	lis := testutil.Listen(t)
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	res := testutil.HalfSentGRPC(t, lis.Addr().String(), pb.Identity_Certify_FullMethodName, 2000, []byte{0x0a, 0x10, 'w', 'e', 'b'}, testutil.DefaultTimeout)
	assert.Equal(t, int(codes.DeadlineExceeded), res.Status, res.String())
	assert.Contains(t, res.Message, "did not arrive within 300ms")
	assert.GreaterOrEqual(t, res.Elapsed, timeout, res.String())

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, pb.Identity_Certify_FullMethodName)
	require.NoError(t, err)
	err = s.RecvMsg(new(pb.CertifyResponse))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)

	// A whole request is still served.
	require.NoError(t, newCertifier(t, pb.NewIdentityClient(conn), "shop", "web", "web-token").certify(ctx))
}

// TestCertifyGivesUpOnABackendThatHangs: the request timeout bounds the
// token review too; the call fails closed.
func TestCertifyGivesUpOnABackendThatHangs(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	hang := authnFunc(func(ctx context.Context, _ []byte) (identity.ServiceAccount, error) {
		<-ctx.Done()
		return identity.ServiceAccount{}, ctx.Err()
	})
	svc, err := identity.NewService(ctx, hang, p.ca, identity.WithRequestTimeout(200*time.Millisecond))
	require.NoError(t, err)
	err = newCertifier(t, serve(t, svc), "shop", "web", "t").certify(ctx)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "deadline exceeded")
}

func TestNewServiceRefusesBadLimits(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	for name, opt := range map[string]identity.Option{
		"zero timeout":       identity.WithRequestTimeout(0),
		"zero burst":         identity.WithRateLimit(identity.RateLimit{Burst: 0, PerSecond: 1}),
		"zero rate":          identity.WithRateLimit(identity.RateLimit{Burst: 1}),
		"negative rate":      identity.WithRateLimit(identity.RateLimit{Burst: 1, PerSecond: -1}),
		"not a number":       identity.WithRateLimit(identity.RateLimit{Burst: 1, PerSecond: nan()}),
		"negative timeout":   identity.WithRequestTimeout(-time.Second),
		"rate without burst": identity.WithRateLimit(identity.RateLimit{PerSecond: 5}),
	} {
		_, err := identity.NewService(ctx, webTokens, p.ca, opt)
		assert.Error(t, err, name)
	}
	_, err := identity.NewService(ctx, webTokens, p.ca, identity.WithRateLimit(identity.RateLimit{}))
	assert.NoError(t, err, "the zero RateLimit turns the limit off")
	assert.Equal(t, codes.ResourceExhausted, identity.Code(identity.ErrRateLimited))
}

func nan() float64 {
	var zero float64
	return zero / zero
}
