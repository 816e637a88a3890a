package iptables

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/origdst"
)

// maxStrangers bounds the connections from others Validate accepts and
// drops while it waits for its own.
const maxStrangers = 64

// tokenLen is the size of the random token Validate sends to itself.
const tokenLen = 16

// Validate checks that the pod's outbound TCP traffic is redirected to the
// proxy's outbound port, as weft-init (or a CNI plugin) sets it up: it
// listens on listenAddr (the outbound port), connects to connectAddr (an
// address outside the pod, where nothing needs to listen) and succeeds
// only if that connection arrives on its own listener carrying the random
// token it sent, with connectAddr as its original destination where the
// platform reports one. It must run as a user whose traffic is redirected
// (not the proxy's). ctx bounds the whole check.
func Validate(ctx context.Context, listenAddr, connectAddr string) error {
	want, err := netip.ParseAddrPort(connectAddr)
	if err != nil {
		return fmt.Errorf("iptables: validate: connect address %q is not IP:port", connectAddr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listenAddr)
	if err != nil {
		return fmt.Errorf("iptables: validate: listening on %s: %w", listenAddr, err)
	}
	defer ln.Close()
	var d net.Dialer
	return ValidateWith(ctx, ln, func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", connectAddr)
	}, want)
}

// ValidateWith is Validate with the listener and the dial given, for
// callers that create sockets in a particular network namespace. dial must
// connect to want.
func ValidateWith(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error), want netip.AddrPort) error {
	token := make([]byte, tokenLen)
	if _, err := rand.Read(token); err != nil {
		return fmt.Errorf("iptables: validate: %w", err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	accepted := make(chan error, 1)
	go func() { accepted <- acceptOwn(ln, token, want, deadline) }()
	// Unblock the accept loop when ctx ends first.
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	conn, err := dial(ctx)
	if err != nil {
		ln.Close()
		<-accepted
		return fmt.Errorf("iptables: validate: connecting to %s failed, so outbound traffic is not redirected to the proxy: %w", want, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(token); err != nil {
		ln.Close()
		<-accepted
		return fmt.Errorf("iptables: validate: writing to %s: %w", want, err)
	}
	if err := <-accepted; err != nil {
		return err
	}
	return nil
}

// acceptOwn accepts connections until one carries token, dropping others.
func acceptOwn(ln net.Listener, token []byte, want netip.AddrPort, deadline time.Time) error {
	if tl, ok := ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(deadline)
	}
	for i := 0; i <= maxStrangers; i++ {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("iptables: validate: the connection to %s never reached %s, so outbound traffic is not redirected to the proxy: %w", want, ln.Addr(), err)
		}
		ok, err := ownConnection(c, token, want, deadline)
		c.Close()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("iptables: validate: %d other connections reached %s before ours", maxStrangers, ln.Addr())
}

// ownConnection reads the token from c; a connection without it is someone
// else's. A connection with the token but another original destination
// means the redirection is not the one expected.
func ownConnection(c net.Conn, token []byte, want netip.AddrPort, deadline time.Time) (bool, error) {
	_ = c.SetReadDeadline(deadline)
	got := make([]byte, len(token))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, token) {
		return false, nil
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return true, nil
	}
	od, err := origdst.Get(tc)
	switch {
	case errors.Is(err, origdst.ErrNotRedirected):
		// No netfilter information (another platform, or a CNI plugin
		// that redirects without conntrack NAT): the token is the proof.
		return true, nil
	case err != nil:
		return false, fmt.Errorf("iptables: validate: %w", err)
	case od.Addr().Unmap() != want.Addr().Unmap() || od.Port() != want.Port():
		return false, fmt.Errorf("iptables: validate: our connection arrived with original destination %s, want %s", od, want)
	}
	return true, nil
}
