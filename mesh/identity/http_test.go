package identity_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
)

// maxTestRequest is the request cap of both paths in these tests.
const maxTestRequest = 16 << 10

// servingPath is one way of serving Certify over TLS on loopback.
type servingPath struct {
	name string
	addr string
}

// serveTLSBothWays serves svc over TLS twice: through grpc-go
// (Register) and through Go's HTTP/2 server (Handler), each with a
// request cap of maxTestRequest; it returns both addresses and the
// client TLS configuration that trusts them.
func serveTLSBothWays(t *testing.T, svc *identity.Service) ([]servingPath, *tls.Config) {
	t.Helper()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "test-root"})
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: "identity.weft.svc"})
	serverTLS := &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}

	glis := testutil.Listen(t)
	gsrv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)), grpc.MaxRecvMsgSize(maxTestRequest))
	svc.Register(gsrv)
	go func() { _ = gsrv.Serve(glis) }()
	t.Cleanup(gsrv.Stop)

	hlis := testutil.Listen(t)
	hsrv := leanServer(svc, serverTLS)
	go func() { _ = hsrv.ServeTLS(hlis, "", "") }()
	t.Cleanup(func() { _ = hsrv.Close() })

	return []servingPath{{"grpc-go", glis.Addr().String()}, {"handler", hlis.Addr().String()}},
		&tls.Config{RootCAs: testutil.Pool(anchor), ServerName: "identity.weft.svc", MinVersion: tls.VersionTLS12}
}

// leanServer is an HTTP/2-only server of svc.Handler: over TLS when
// serverTLS is set, unencrypted HTTP/2 otherwise.
func leanServer(svc *identity.Service, serverTLS *tls.Config) *http.Server {
	var protos http.Protocols
	if serverTLS != nil {
		serverTLS = serverTLS.Clone()
		serverTLS.NextProtos = []string{"h2"}
		protos.SetHTTP2(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	return &http.Server{Handler: svc.Handler(maxTestRequest), TLSConfig: serverTLS, Protocols: &protos, ReadHeaderTimeout: 10 * time.Second}
}

func grpcTLSClient(t *testing.T, addr string, clientTLS *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestCertifyAnswersTheSameThroughTheHandlerAsThroughGRPCGo: grpc-go's
// generated client gets, from the handler on Go's HTTP/2 server, the
// same certificate or the same status (code and message) as from the
// grpc-go server, for every outcome of Certify.
func TestCertifyAnswersTheSameThroughTheHandlerAsThroughGRPCGo(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	deadlines := make(chan time.Time, 1)
	authn := authnFunc(func(ctx context.Context, token []byte) (identity.ServiceAccount, error) {
		switch string(token) {
		case "down-token":
			return identity.ServiceAccount{}, errors.New("the token reviewer is down")
		case "deadline-token":
			dl, _ := ctx.Deadline()
			deadlines <- dl
			return identity.ServiceAccount{}, identity.ErrUnauthenticated
		}
		return webTokens.Authenticate(ctx, token)
	})
	svc, err := identity.NewService(ctx, authn, p.ca, identity.WithRateLimit(identity.RateLimit{}))
	require.NoError(t, err)
	paths, clientTLS := serveTLSBothWays(t, svc)

	web := mustName(t, "shop", "web")
	csr := testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web.String())
	cases := []struct {
		name string
		req  *pb.CertifyRequest
		code codes.Code
	}{
		{"a bad token", &pb.CertifyRequest{Identity: web.String(), Token: []byte("nobody"), CertificateSigningRequest: csr}, codes.Unauthenticated},
		{"another identity", &pb.CertifyRequest{Identity: mustName(t, "shop", "admin").String(), Token: []byte("web-token"), CertificateSigningRequest: csr}, codes.FailedPrecondition},
		{"a CSR that is not one", &pb.CertifyRequest{Identity: web.String(), Token: []byte("web-token"), CertificateSigningRequest: []byte("not a CSR")}, codes.InvalidArgument},
		{"an invalid name", &pb.CertifyRequest{Identity: "web", Token: []byte("web-token"), CertificateSigningRequest: csr}, codes.InvalidArgument},
		{"an identity of another trust domain", &pb.CertifyRequest{Identity: "web.shop.serviceaccount.identity.weft.example.org", Token: []byte("web-token"), CertificateSigningRequest: csr}, codes.FailedPrecondition},
		{"an authenticator that is down", &pb.CertifyRequest{Identity: web.String(), Token: []byte("down-token"), CertificateSigningRequest: csr}, codes.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []string
			for _, path := range paths {
				_, err := pb.NewIdentityClient(grpcTLSClient(t, path.addr, clientTLS)).Certify(ctx, tc.req)
				assert.Equal(t, tc.code, status.Code(err), "%s: %v", path.name, err)
				msgs = append(msgs, status.Convert(err).Message())
			}
			assert.Equal(t, msgs[0], msgs[1], "the status message")
		})
	}

	t.Run("the client's deadline reaches the service", func(t *testing.T) {
		// The client allows 3 s, the service 10 s (its default request
		// timeout): a deadline before start+5s can only be the client's.
		const clientTimeout = 3 * time.Second
		for _, path := range paths {
			callCtx, cancel := context.WithTimeout(ctx, clientTimeout)
			start := time.Now()
			_, err := pb.NewIdentityClient(grpcTLSClient(t, path.addr, clientTLS)).Certify(callCtx,
				&pb.CertifyRequest{Identity: web.String(), Token: []byte("deadline-token"), CertificateSigningRequest: csr})
			cancel()
			require.Equal(t, codes.Unauthenticated, status.Code(err), "%s: %v", path.name, err)
			dl := <-deadlines
			assert.True(t, dl.Before(start.Add(5*time.Second)), "%s: the service's deadline %s is not the client's (start %s)", path.name, dl, start)
		}
	})
}

// TestCertifyHandlerAppliesTheRateLimitAsGRPCGo: the same service
// through both paths, one identity each: a certificate, then
// RESOURCE_EXHAUSTED with the limit's message.
func TestCertifyHandlerAppliesTheRateLimitAsGRPCGo(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	svc, err := identity.NewService(ctx, webTokens, p.ca, identity.WithRateLimit(identity.RateLimit{Burst: 1, PerSecond: 1e-6}))
	require.NoError(t, err)
	paths, clientTLS := serveTLSBothWays(t, svc)
	var msgs []string
	for i, path := range paths {
		sa := []string{"web", "admin"}[i]
		n := mustName(t, "shop", sa)
		key := testutil.GenerateKey(t, testutil.ECDSAP256)
		req := &pb.CertifyRequest{Identity: n.String(), Token: []byte(sa + "-token"), CertificateSigningRequest: testutil.CSR(t, key, n.String())}
		c := pb.NewIdentityClient(grpcTLSClient(t, path.addr, clientTLS))
		resp, err := c.Certify(ctx, req)
		require.NoError(t, err, path.name)
		leaf, err := x509.ParseCertificate(resp.GetLeafCertificate())
		require.NoError(t, err, path.name)
		assert.Equal(t, []string{n.String()}, leaf.DNSNames, path.name)
		assert.Equal(t, leaf.NotAfter, resp.GetValidUntil().AsTime(), path.name)
		require.Len(t, resp.GetIntermediateCertificates(), 1, path.name)
		assert.Equal(t, p.issuer.Cert.Raw, resp.GetIntermediateCertificates()[0], path.name)

		_, err = c.Certify(ctx, req)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%s: %v", path.name, err)
		msgs = append(msgs, status.Convert(err).Message())
	}
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		assert.Regexp(t, `^identity: too many certificate requests for [a-z]+\.shop\.serviceaccount.* rate limited$`, m)
	}
}

// TestCertifyHandlerCountsTheSameMetrics: the handler's calls reach the
// service's metrics as Register's do, including a request that never
// arrives (deadline_exceeded).
func TestCertifyHandlerCountsTheSameMetrics(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	reg := prometheus.NewRegistry()
	m, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	const timeout = 300 * time.Millisecond
	svc, err := identity.NewService(ctx, webTokens, p.ca, identity.WithMetrics(m), identity.WithRequestTimeout(timeout))
	require.NoError(t, err)
	lis := testutil.Listen(t)
	srv := leanServer(svc, nil)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	c := pb.NewIdentityClient(conn)

	web := mustName(t, "shop", "web")
	csr := testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web.String())
	_, err = c.Certify(ctx, &pb.CertifyRequest{Identity: web.String(), Token: []byte("web-token"), CertificateSigningRequest: csr})
	require.NoError(t, err)
	_, err = c.Certify(ctx, &pb.CertifyRequest{Identity: web.String(), Token: []byte("nobody"), CertificateSigningRequest: csr})
	require.Equal(t, codes.Unauthenticated, status.Code(err))

	// Headers and half a message, then nothing: DEADLINE_EXCEEDED at the
	// request timeout, counted.
	res := testutil.HalfSentGRPC(t, lis.Addr().String(), identity.CertifyPath, 200, []byte{0x0a, 0x05, 'w', 'e'}, testutil.DefaultTimeout)
	assert.Equal(t, int(codes.DeadlineExceeded), res.Status, "%s", res)
	assert.GreaterOrEqual(t, res.Elapsed, timeout, "%s", res)
	assert.Contains(t, res.Message, "did not arrive within 300ms", "%s", res)

	assert.Equal(t, 1.0, counterValue(t, reg, "weft_identity_certify_requests_total", "ok"))
	assert.Equal(t, 1.0, counterValue(t, reg, "weft_identity_certify_requests_total", "unauthenticated"))
	assert.Equal(t, 1.0, counterValue(t, reg, "weft_identity_certify_requests_total", "deadline_exceeded"))
}

// TestTheProxysIdentityClientGetsACertificateThroughTheHandler: the
// proxy's identity client (mesh/identity/client) over TLS, end to end.
func TestTheProxysIdentityClientGetsACertificateThroughTheHandler(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	svc, err := identity.NewService(ctx, webTokens, p.ca)
	require.NoError(t, err)
	paths, clientTLS := serveTLSBothWays(t, svc)
	web := mustName(t, "shop", "web")
	c, err := client.New(ctx, client.Config{Name: web, Bundle: p.bundle, Certifier: client.NewGRPCCertifier(grpcTLSClient(t, paths[1].addr, clientTLS))},
		client.WithToken(func() ([]byte, error) { return []byte("web-token"), nil }))
	require.NoError(t, err)
	defer c.Close()
	cert, err := c.Certificate()
	require.NoError(t, err)
	assert.Equal(t, []string{web.String()}, cert.Leaf.DNSNames)
}

// TestCertifyHandlerRefusesBadRequestsAsGRPCGoDoes: malformed, hostile
// and unknown requests get the same HTTP status and gRPC status from the
// handler as from grpc-go, and none of them is certified.
func TestCertifyHandlerRefusesBadRequestsAsGRPCGoDoes(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	issuer := &countingIssuer{CA: p.ca}
	svc, err := identity.NewService(ctx, webTokens, issuer)
	require.NoError(t, err)
	paths, clientTLS := serveTLSBothWays(t, svc)
	var protos http.Protocols
	protos.SetHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, Protocols: &protos}, Timeout: testutil.DefaultTimeout}
	t.Cleanup(hc.CloseIdleConnections)

	web := mustName(t, "shop", "web")
	good, err := proto.Marshal(&pb.CertifyRequest{Identity: web.String(), Token: []byte("web-token"),
		CertificateSigningRequest: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web.String())})
	require.NoError(t, err)
	huge := make([]byte, maxTestRequest+1)
	cases := []struct {
		name         string
		method, path string
		header       map[string]string
		body         []byte
		code         codes.Code
		sameMessage  bool
	}{
		{"an unknown method", "POST", "/io.linkerd.proxy.identity.Identity/Renew", nil, testutil.GRPCFrame(0, good), codes.Unimplemented, true},
		{"an unknown service", "POST", "/io.linkerd.proxy.tap.Tap/Observe", nil, testutil.GRPCFrame(0, good), codes.Unimplemented, true},
		{"a compressed message", "POST", identity.CertifyPath, map[string]string{"Grpc-Encoding": "gzip"}, testutil.GRPCFrame(1, good), codes.Unimplemented, true},
		{"the compressed flag without an encoding", "POST", identity.CertifyPath, nil, testutil.GRPCFrame(1, good), codes.Internal, true},
		{"an unknown payload format", "POST", identity.CertifyPath, nil, testutil.GRPCFrame(2, good), codes.Internal, true},
		{"a message over the cap", "POST", identity.CertifyPath, nil, testutil.GRPCFrame(0, huge), codes.ResourceExhausted, true},
		{"a truncated message", "POST", identity.CertifyPath, nil, testutil.GRPCFrame(0, good)[:20], codes.Internal, false},
		{"no message", "POST", identity.CertifyPath, nil, nil, codes.Internal, true},
		{"two messages", "POST", identity.CertifyPath, nil, append(testutil.GRPCFrame(0, good), testutil.GRPCFrame(0, good)...), codes.Internal, true},
		{"a message that is not protobuf", "POST", identity.CertifyPath, nil, testutil.GRPCFrame(0, []byte{0xff, 0xff, 0xff}), codes.Internal, true},
		{"a wrong content-type", "POST", identity.CertifyPath, map[string]string{"Content-Type": "application/json"}, testutil.GRPCFrame(0, good), codes.InvalidArgument, true},
		{"a malformed grpc-timeout", "POST", identity.CertifyPath, map[string]string{"Grpc-Timeout": "1x"}, testutil.GRPCFrame(0, good), codes.Internal, false},
		{"a GET", "GET", identity.CertifyPath, nil, nil, codes.Internal, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := testutil.RawGRPCCall(t, hc, paths[0].addr, tc.method, tc.path, tc.header, tc.body)
			got := testutil.RawGRPCCall(t, hc, paths[1].addr, tc.method, tc.path, tc.header, tc.body)
			require.Equal(t, strconv.Itoa(int(tc.code)), want.Code, "grpc-go's answer: %+v", want)
			assert.Equal(t, want.HTTPStatus, got.HTTPStatus, "the HTTP status: %+v", got)
			assert.Equal(t, want.Code, got.Code, "the gRPC status: %+v", got)
			if tc.sameMessage {
				assert.Equal(t, want.Message, got.Message, "the gRPC message")
			}
		})
	}
	assert.Zero(t, issuer.n.Load(), "nothing was issued")

	t.Run("HTTP/1.1 is not served", func(t *testing.T) {
		h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, Timeout: testutil.DefaultTimeout}
		t.Cleanup(h1.CloseIdleConnections)
		_, err := h1.Post("https://"+paths[1].addr+identity.CertifyPath, "application/grpc", bytes.NewReader(testutil.GRPCFrame(0, good)))
		assert.Error(t, err, "an HTTP/1.1 client gets no answer")
		var ne net.Error
		assert.False(t, errors.As(err, &ne) && ne.Timeout(), "refused, not left hanging: %v", err)
	})
}
