package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"
)

// selfSigned is a throwaway certificate for the TLS echo server. The
// suite checks which backend a TLS connection reached (by SNI), not whom
// it reached: the caller does not verify it.
func selfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// tlsEcho serves the line echo of a.echo over TLS on ln.
func (a *app) tlsEcho(ln net.Listener) error {
	cert, err := selfSigned(a.name)
	if err != nil {
		return err
	}
	go a.echo(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	return nil
}

// tlsCall is /tls: one line exchange over TLS with the server name sni.
func (a *app) tlsCall(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	addr, sni, payload := q.Get("addr"), q.Get("sni"), q.Get("payload")
	if _, _, err := net.SplitHostPort(addr); err != nil || sni == "" || strings.ContainsAny(payload, "\r\n") {
		http.Error(w, "want addr=host:port, sni=NAME and a one-line payload", http.StatusBadRequest)
		return
	}
	var res TCPResult
	reply, err := tlsExchange(r.Context(), addr, sni, payload)
	if err != nil {
		res.Error = err.Error()
	} else {
		res.Reply = reply
	}
	writeJSON(w, res)
}

func tlsExchange(ctx context.Context, addr, sni, payload string) (string, error) {
	d := tls.Dialer{Config: &tls.Config{ServerName: sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // see selfSigned
	return lineExchange(ctx, payload, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) })
}
