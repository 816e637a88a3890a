package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// Listeners are the sockets a proxy serves; nil ones are not served. The
// caller opens them (usually from Config's addresses, see Listen) and the
// proxy closes them when it stops.
type Listeners struct {
	// Inbound receives connections for the application and from other
	// proxies.
	Inbound net.Listener
	// Outbound receives connections redirected by iptables; their original
	// destination comes from SO_ORIGINAL_DST.
	Outbound net.Listener
	// Connect is an explicit-mode HTTP CONNECT proxy.
	Connect net.Listener
	// Mapped are explicit-mode listeners whose connections all go to one
	// authority.
	Mapped []MappedListener
	// Admin serves /live, /ready, /metrics and /shutdown.
	Admin net.Listener
	// Tap serves io.linkerd.proxy.tap over mutual TLS to the identities
	// in Config.TapIdentities.
	Tap net.Listener
}

// MappedListener is a static explicit-mode listener.
type MappedListener struct {
	Listener  net.Listener
	Authority string
}

// Listen opens every listener cfg names. cfg must name at least one that
// carries traffic (inbound, outbound, connect or a mapping).
func Listen(ctx context.Context, cfg Config) (Listeners, error) {
	if err := cfg.checkListenAddrs(); err != nil {
		return Listeners{}, err
	}
	var ls Listeners
	var lc net.ListenConfig
	open := func(addr string, dst *net.Listener) error {
		if addr == "" {
			return nil
		}
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("dataplane: listening on %s: %w", addr, err)
		}
		*dst = l
		return nil
	}
	err := errors.Join(
		open(cfg.InboundAddr, &ls.Inbound),
		open(cfg.OutboundAddr, &ls.Outbound),
		open(cfg.ConnectAddr, &ls.Connect),
		open(cfg.AdminAddr, &ls.Admin),
	)
	if len(cfg.TapIdentities) > 0 {
		err = errors.Join(err, open(cfg.TapAddr, &ls.Tap))
	}
	for _, m := range cfg.Mappings {
		var l net.Listener
		if e := open(m.Listen, &l); e != nil {
			err = errors.Join(err, e)
			continue
		}
		ls.Mapped = append(ls.Mapped, MappedListener{Listener: l, Authority: m.Authority})
	}
	if err != nil {
		ls.Close()
		return Listeners{}, err
	}
	return ls, nil
}

// Close closes every listener.
func (ls Listeners) Close() {
	for _, l := range ls.all() {
		l.Close()
	}
}

// all lists the listeners that are set.
func (ls Listeners) all() []net.Listener {
	var out []net.Listener
	for _, l := range []net.Listener{ls.Inbound, ls.Outbound, ls.Connect, ls.Admin, ls.Tap} {
		if l != nil {
			out = append(out, l)
		}
	}
	for _, m := range ls.Mapped {
		out = append(out, m.Listener)
	}
	return out
}
