package client_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
)

// TestClientRenewsAtSeventyPercentOfLifetime steps a fake clock through
// two renewals of a 10h certificate.
func TestClientRenewsAtSeventyPercentOfLifetime(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := testutil.Context(t, 0)
	clock := newFakeClock()
	m := newMesh(t, identity.WithClock(clock.Now), identity.WithLifetime(10*time.Hour), identity.WithClockSkewAllowance(0))
	ca := &switchable{inner: m.service}
	c, err := client.New(ctx, client.Config{Name: name(t, "web"), Bundle: m.bundle, Certifier: ca},
		client.WithClock(clock), client.WithToken(token("web-token")))
	require.NoError(t, err)
	defer c.Close()

	first, err := c.Certificate()
	require.NoError(t, err)
	assert.WithinDuration(t, clock.Now().Add(10*time.Hour), first.Leaf.NotAfter, 0)
	<-c.Updated() // the first certificate is announced too

	for round := 1; round <= 2; round++ {
		w := clock.NextWaiter(t)
		assert.Equal(t, 7*time.Hour, w.d, "round %d: renewal is scheduled at 70%% of the lifetime", round)
		clock.Advance(w.d - time.Second)
		assert.Equal(t, int32(round), ca.calls.Load(), "round %d: no renewal before 70%%", round)
		clock.Advance(time.Second)
		select {
		case <-c.Updated():
		case <-ctx.Done():
			t.Fatalf("round %d: no renewal at 70%%", round)
		}
		assert.Equal(t, int32(round+1), ca.calls.Load())
		cur, err := c.Certificate()
		require.NoError(t, err)
		assert.WithinDuration(t, clock.Now().Add(10*time.Hour), cur.Leaf.NotAfter, 0)
		assert.NotEqual(t, first.Leaf.SerialNumber, cur.Leaf.SerialNumber)
		assert.NotEqual(t, first.PrivateKey, cur.PrivateKey, "each renewal uses a fresh key")
	}
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
}

// TestClientSurvivesTheCABeingDownUntilExpiry: the current certificate
// is served until it expires, retries back off with jitter, and service
// resumes once the CA answers again.
func TestClientSurvivesTheCABeingDownUntilExpiry(t *testing.T) {
	ctx := testutil.Context(t, 0)
	clock := newFakeClock()
	m := newMesh(t, identity.WithClock(clock.Now), identity.WithLifetime(10*time.Hour), identity.WithClockSkewAllowance(0))
	ca := &switchable{inner: m.service}
	base, maxBackoff := time.Minute, 30*time.Minute
	c, err := client.New(ctx, client.Config{Name: name(t, "web"), Bundle: m.bundle, Certifier: ca},
		client.WithClock(clock), client.WithToken(token("web-token")), client.WithBackoff(base, maxBackoff))
	require.NoError(t, err)
	defer c.Close()
	first, err := c.Certificate()
	require.NoError(t, err)
	expiry := first.Leaf.NotAfter
	// The first certificate was announced on Updated; take that
	// notification now, so the wait below sees the renewal after the CA
	// is back and not this one.
	select {
	case <-c.Updated():
	default:
		t.Fatal("the first certificate was not announced on Updated")
	}

	ca.down.Store(true)
	clock.Advance(clock.NextWaiter(t).d) // reach 70%: the first renewal fails
	expected := base
	for clock.Now().Before(expiry) {
		w := clock.NextWaiter(t)
		if w.d > 2*time.Hour {
			t.Fatalf("a retry was scheduled %s out while the certificate is about to expire", w.d)
		}
		assert.GreaterOrEqual(t, w.d, expected/2, "jittered delay below half of %s", expected)
		assert.LessOrEqual(t, w.d, expected, "jittered delay above %s", expected)
		expected = min(2*expected, maxBackoff)
		cur, err := c.Certificate()
		require.NoError(t, err, "the certificate must be served until it expires (now %s, expiry %s)", clock.Now(), expiry)
		assert.Equal(t, first.Leaf.SerialNumber, cur.Leaf.SerialNumber)
		clock.Advance(w.d)
	}
	_, err = c.Certificate()
	assert.ErrorIs(t, err, client.ErrNoCertificate, "an expired certificate is never served")

	ca.down.Store(false)
	clock.Advance(clock.NextWaiter(t).d)
	select {
	case <-c.Updated():
	case <-ctx.Done():
		t.Fatal("no renewal after the CA came back")
	}
	cur, err := c.Certificate()
	require.NoError(t, err)
	assert.True(t, cur.Leaf.NotAfter.After(clock.Now()))
}

func TestClientRefreshIsBoundedByMinAndMaxRefresh(t *testing.T) {
	ctx := testutil.Context(t, 0)
	clock := newFakeClock()
	m := newMesh(t, identity.WithClock(clock.Now), identity.WithLifetime(10*time.Hour), identity.WithClockSkewAllowance(0))
	c, err := client.New(ctx, client.Config{Name: name(t, "web"), Bundle: m.bundle, Certifier: m.service},
		client.WithClock(clock), client.WithToken(token("web-token")), client.WithRefreshBounds(time.Minute, 2*time.Hour))
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, 2*time.Hour, clock.NextWaiter(t).d)

	clock2 := newFakeClock()
	clock2.now = clock.Now()
	c2, err := client.New(ctx, client.Config{Name: name(t, "db"), Bundle: m.bundle, Certifier: m.service},
		client.WithClock(clock2), client.WithToken(token("db-token")), client.WithRefreshBounds(8*time.Hour, 9*time.Hour))
	require.NoError(t, err)
	defer c2.Close()
	assert.Equal(t, 8*time.Hour, clock2.NextWaiter(t).d)
}

// forged returns a certificate that does not chain to the client's bundle.
type forged struct{ other *identity.Service }

func (f forged) Certify(ctx context.Context, req identity.Request) (*identity.Issued, error) {
	return f.other.Certify(ctx, req)
}

func TestNewRefusesCertificatesThatDoNotChainToTheBundle(t *testing.T) {
	ctx := testutil.Context(t, 500*time.Millisecond)
	m := newMesh(t)
	other := newMesh(t)
	_, err := client.New(ctx, client.Config{Name: name(t, "web"), Bundle: m.bundle, Certifier: forged{other.service}},
		client.WithToken(token("web-token")), client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, identity.ErrPeerRejected)
}

func TestNewReportsTheLastErrorWhenTheTokenIsRefused(t *testing.T) {
	ctx := testutil.Context(t, 300*time.Millisecond)
	m := newMesh(t)
	_, err := client.New(ctx, client.Config{Name: name(t, "web"), Bundle: m.bundle, Certifier: m.service},
		client.WithToken(token("db-token")), client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	require.Error(t, err)
	assert.ErrorIs(t, err, identity.ErrIdentityMismatch)
}

func TestNewValidatesItsConfig(t *testing.T) {
	ctx := testutil.Context(t, 0)
	m := newMesh(t)
	good := client.Config{Name: name(t, "web"), Bundle: m.bundle, Certifier: m.service, TokenFile: "/nonexistent"}
	for label, cfg := range map[string]client.Config{
		"no name":      {Bundle: m.bundle, Certifier: m.service, TokenFile: "x"},
		"no bundle":    {Name: good.Name, Certifier: m.service, TokenFile: "x"},
		"no certifier": {Name: good.Name, Bundle: m.bundle, TokenFile: "x"},
		"no token":     {Name: good.Name, Bundle: m.bundle, Certifier: m.service},
	} {
		_, err := client.New(ctx, cfg)
		assert.Error(t, err, label)
	}
	_, err := client.New(ctx, good, client.WithRefreshBounds(time.Hour, time.Minute))
	assert.Error(t, err)
	_, err = client.New(ctx, good, client.WithBackoff(0, time.Minute))
	assert.Error(t, err)
}

// TestClientOverGRPCReadsTheTokenFile runs the whole path: token file,
// CSR, Certify over a loopback gRPC connection, DER answer, verification.
func TestClientOverGRPCReadsTheTokenFile(t *testing.T) {
	ctx := testutil.Context(t, 0)
	m := newMesh(t)
	lis := testutil.Listen(t)
	srv := grpc.NewServer()
	m.service.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	tokenFile := filepath.Join(t.TempDir(), "token")
	testutil.WriteFile(t, tokenFile, []byte("web-token\n"))
	c, err := client.New(ctx, client.Config{Name: name(t, "web"), TokenFile: tokenFile, Bundle: m.bundle, Certifier: client.NewGRPCCertifier(conn)})
	require.NoError(t, err)
	defer c.Close()
	cert, err := c.Certificate()
	require.NoError(t, err)
	assert.Equal(t, []string{name(t, "web").String()}, cert.Leaf.DNSNames)
	assert.Len(t, cert.Certificate, 2, "leaf and issuer are presented")

	_, err = client.New(testutil.Context(t, 200*time.Millisecond), client.Config{Name: name(t, "web"), TokenFile: filepath.Join(t.TempDir(), "missing"), Bundle: m.bundle, Certifier: client.NewGRPCCertifier(conn)},
		client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing")
}

// TestClientChecksTheTokenFileByTheServersRule: a token file whose token
// the service would refuse (empty, or over identity.MaxTokenSize) is
// refused by the client, naming the file, and nothing is sent.
func TestClientChecksTheTokenFileByTheServersRule(t *testing.T) {
	m := newMesh(t)
	cases := map[string][]byte{
		"only whitespace":       []byte(" \n\t\n"),
		"over MaxTokenSize":     bytes.Repeat([]byte("x"), identity.MaxTokenSize+1),
		"over the file's slack": bytes.Repeat([]byte("x"), 2*identity.MaxTokenSize),
	}
	for what, content := range cases {
		t.Run(what, func(t *testing.T) {
			var calls atomic.Int32
			certifier := certifyFunc(func(ctx context.Context, req identity.Request) (*identity.Issued, error) {
				calls.Add(1)
				return m.service.Certify(ctx, req)
			})
			tokenFile := filepath.Join(t.TempDir(), "token")
			testutil.WriteFile(t, tokenFile, content)
			_, err := client.New(testutil.Context(t, 200*time.Millisecond), client.Config{Name: name(t, "web"), TokenFile: tokenFile, Bundle: m.bundle, Certifier: certifier},
				client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tokenFile)
			assert.Zero(t, calls.Load(), "a token the service would refuse is not sent")
		})
	}
	// A token of exactly MaxTokenSize with a trailing newline is read
	// whole: the newline is not counted against the token.
	tokenFile := filepath.Join(t.TempDir(), "token")
	testutil.WriteFile(t, tokenFile, append(bytes.Repeat([]byte("x"), identity.MaxTokenSize), '\n'))
	var seen atomic.Int64
	_, _ = client.New(testutil.Context(t, 200*time.Millisecond), client.Config{Name: name(t, "web"), TokenFile: tokenFile, Bundle: m.bundle,
		Certifier: certifyFunc(func(ctx context.Context, req identity.Request) (*identity.Issued, error) {
			seen.Store(int64(len(req.Token)))
			return m.service.Certify(ctx, req)
		})}, client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	assert.Equal(t, int64(identity.MaxTokenSize), seen.Load())
}

type certifyFunc func(ctx context.Context, req identity.Request) (*identity.Issued, error)

func (f certifyFunc) Certify(ctx context.Context, req identity.Request) (*identity.Issued, error) {
	return f(ctx, req)
}
