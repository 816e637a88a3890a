// Package clienthello reads the server name (SNI) of a TLS ClientHello
// without terminating TLS: the proxy routes a connection by it (Gateway
// API TLSRoutes) and then hands every byte it read, unchanged, to the
// backend, which does the handshake with the client.
//
// The ClientHello is parsed by crypto/tls itself (a tls.Server whose
// GetConfigForClient records the ClientHelloInfo and stops the
// handshake), so the bytes are judged by the same code that judges every
// other handshake in the proxy. The reader trusts nothing it reads: it
// reads at most Max bytes, writes nothing back (crypto/tls's alerts go
// nowhere), and a name that is not a DNS hostname is an error.
package clienthello

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Max bounds the bytes read for one ClientHello: a TLS record of 16 KiB
// with its header and room for what a client pipelines after it. Real
// ClientHellos, post-quantum key shares included, take 2 KiB or less.
const Max = 16<<10 + 2<<10

// ErrTooLong is returned when no complete ClientHello fits in Max bytes.
var ErrTooLong = errors.New("clienthello: no ClientHello within the read limit")

// ErrNotTLS is returned (wrapped) when the bytes are not a TLS
// ClientHello crypto/tls accepts.
var ErrNotTLS = errors.New("clienthello: not a TLS ClientHello")

// errSeen stops the handshake once the ClientHello was read.
var errSeen = errors.New("clienthello: seen")

// Read reads one ClientHello from r and returns its server name, lower
// case without a trailing dot ("" when the client sent none), and every
// byte it read from r, in order (the ClientHello and anything read past
// it), which the caller forwards before the rest of the stream. The read
// ends at the ClientHello, at Max bytes, or when r fails (the caller bounds
// it in time with a read deadline). On an error the bytes read so far are
// returned too.
func Read(r io.Reader) (serverName string, read []byte, err error) {
	rec := &recorder{r: r}
	var name string
	seen := false
	srv := tls.Server(&helloConn{rec: rec}, &tls.Config{
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			name, seen = chi.ServerName, true
			return nil, errSeen
		},
	})
	herr := srv.HandshakeContext(context.Background())
	if !seen {
		if errors.Is(herr, ErrTooLong) {
			return "", rec.buf, ErrTooLong
		}
		return "", rec.buf, fmt.Errorf("%w: %v", ErrNotTLS, herr)
	}
	name = strings.ToLower(name)
	if name != "" && !validName(name) {
		return "", rec.buf, fmt.Errorf("clienthello: server name %q is not a DNS hostname", name)
	}
	return name, rec.buf, nil
}

// validName reports whether s is a DNS hostname: labels of letters,
// digits and hyphens (not at either end), 1 to 63 bytes each, 253 bytes in
// all. crypto/tls already refuses a trailing dot.
func validName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// recorder reads from r, at most Max bytes in all, keeping what it read.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (c *recorder) Read(p []byte) (int, error) {
	room := Max - len(c.buf)
	if room <= 0 {
		return 0, ErrTooLong
	}
	if len(p) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.buf = append(c.buf, p[:n]...)
	return n, err
}

// helloConn is the net.Conn crypto/tls reads the ClientHello from:
// writes (the alert that ends the handshake) are dropped, deadlines are
// the caller's business.
type helloConn struct{ rec *recorder }

func (c *helloConn) Read(p []byte) (int, error)         { return c.rec.Read(p) }
func (c *helloConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *helloConn) Close() error                       { return nil }
func (c *helloConn) LocalAddr() net.Addr                { return helloAddr{} }
func (c *helloConn) RemoteAddr() net.Addr               { return helloAddr{} }
func (c *helloConn) SetDeadline(time.Time) error        { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error    { return nil }
func (c *helloConn) SetWriteDeadline(t time.Time) error { return nil }

type helloAddr struct{}

func (helloAddr) Network() string { return "clienthello" }
func (helloAddr) String() string  { return "clienthello" }
