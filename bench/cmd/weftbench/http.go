package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// body is the backend's answer: small, like an API status response.
var body = []byte(`{"status":"ok","service":"bench","padding":"0123456789abcdef"}` + "\n")

// runBackend serves HTTP/1.1 and prior-knowledge HTTP/2 on -http (every
// request gets the same small body) and gRPC on -grpc (the standard health
// service, plus reflection so ghz needs no proto file).
func runBackend(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	httpAddr := fs.String("http", "127.0.0.1:8080", "HTTP listen address")
	grpcAddr := fs.String("grpc", "127.0.0.1:8090", "gRPC listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, a := range []string{*httpAddr, *grpcAddr} {
		if err := loopbackOnly(a); err != nil {
			return err
		}
	}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	gl, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		hl.Close()
		return err
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		}),
		Protocols:         protos,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	gs := grpc.NewServer()
	hsrv := health.NewServer()
	hsrv.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hsrv)
	reflection.Register(gs)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(hl) }()
	go func() { errc <- gs.Serve(gl) }()
	fmt.Fprintf(out, "ready http=%s grpc=%s\n", hl.Addr(), gl.Addr())
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	gs.Stop()
	_ = hs.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// runGoProxy is the plain Go reverse proxy: net/http/httputil.ReverseProxy
// with the standard transport, set up the way a Go programmer would for a
// TLS hop (HTTP/2 attempted, a sensible idle pool). The client side listens
// in plaintext (HTTP/1.1 and h2c) and dials -to over TLS with a client
// certificate; the server side terminates that TLS, requires a client
// certificate and forwards HTTP to -to (gRPC requests to -grpc-to over
// h2c).
func runGoProxy(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("goproxy", flag.ContinueOnError)
	listen := fs.String("listen", "", "listen address")
	to := fs.String("to", "", "upstream URL (http:// or https://)")
	grpcTo := fs.String("grpc-to", "", "upstream host:port for gRPC requests (h2c); default: -to")
	cert := fs.String("cert", "", "certificate chain PEM: served when -tls, presented upstream otherwise")
	key := fs.String("key", "", "key PEM for -cert")
	ca := fs.String("ca", "", "trust anchors PEM")
	serverName := fs.String("server-name", "", "name expected in the upstream's certificate")
	serveTLS := fs.Bool("tls", false, "terminate TLS (with client certificates) on -listen")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*listen); err != nil {
		return err
	}
	up, err := url.Parse(*to)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") {
		return fmt.Errorf("-to %q: want an http:// or https:// URL", *to)
	}
	if err := loopbackOnly(up.Host); err != nil {
		return err
	}
	var pair tls.Certificate
	var roots *x509.CertPool
	if *cert != "" {
		if pair, err = tls.LoadX509KeyPair(*cert, *key); err != nil {
			return err
		}
	}
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-ca %s: no certificates", *ca)
		}
	}

	upstream := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	if up.Scheme == "https" {
		upstream.TLSClientConfig = &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			RootCAs:      roots,
			ServerName:   *serverName,
		}
	}
	grpcTransport := http.RoundTripper(upstream)
	grpcHost := up.Host
	if up.Scheme == "http" {
		// gRPC needs HTTP/2; to a plaintext upstream that is h2c.
		h2c := new(http.Protocols)
		h2c.SetUnencryptedHTTP2(true)
		grpcTransport = &http.Transport{
			DialContext:         upstream.DialContext,
			Protocols:           h2c,
			MaxIdleConnsPerHost: 256,
		}
		if *grpcTo != "" {
			if err := loopbackOnly(*grpcTo); err != nil {
				return err
			}
			grpcHost = *grpcTo
		}
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			if strings.HasPrefix(r.In.Header.Get("Content-Type"), "application/grpc") {
				r.SetURL(&url.URL{Scheme: up.Scheme, Host: grpcHost})
			} else {
				r.SetURL(up)
			}
			r.Out.Host = r.In.Host
		},
		Transport: roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				return grpcTransport.RoundTrip(r)
			}
			return upstream.RoundTrip(r)
		}),
		ErrorLog: log.New(io.Discard, "", 0),
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	srv := &http.Server{
		Handler:           rp,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
		Protocols:         protos,
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *serveTLS {
		protos.SetHTTP2(true)
		srv.TLSConfig = &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    roots,
			NextProtos:   []string{"h2", "http/1.1"},
		}
		ln = tls.NewListener(ln, srv.TLSConfig)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(out, "ready addr=%s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	_ = srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
