package meshstate

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/internal/dnsname"
)

// Route metrics name the Service a request went to as Linkerd's do: the
// dst label of the route_* series is the Service's fully qualified name
// and port ("web.shop.svc.cluster.local:8080"), whichever address the
// application dialled (a ClusterIP in a pod). The name comes from
// discovery: a profile whose parent is a Service (parent_ref) and whose
// fully_qualified_name is that Service's. Anything else keeps the target
// as its dst (the original destination, or the mapped authority), under
// the same budget of distinct values as the other authority labels.
//
// The client proxy tells the server proxy that name in the
// l5d-dst-canonical request header. The server proxy believes it only
// from a peer proxy (mesh TLS with a verified identity and the transport
// header), and only as a question: it asks discovery for the profile of
// that name and labels its inbound route series with it when discovery
// answers that the name is a Service, matching the request against that
// profile's routes (the ServiceProfile routes of the server side). A name
// discovery does not know adds no label and no route. The names it asks
// about are bounded (maxInboundProfiles).

// maxInboundProfiles bounds the names an inbound proxy follows the
// profile of; past it, requests naming a new one get no profile route.
const maxInboundProfiles = 128

// defaultRouteName is the rt_route of requests no profile or policy route
// named (viz shows it as [DEFAULT], as Linkerd's CLI does).
const defaultRouteName = route.DefaultName

// canonicalName returns "FQDN:PORT" of the Service prof says target is,
// or "" when prof names no Service (no parent_ref of kind Service, or a
// fully_qualified_name that is not that Service's name).
func canonicalName(prof *pdst.DestinationProfile, target string) string {
	res := prof.GetParentRef().GetResource()
	if res == nil || res.GetKind() != "Service" {
		return ""
	}
	fqn := strings.ToLower(strings.TrimSuffix(prof.GetFullyQualifiedName(), "."))
	port := res.GetPort()
	if port == 0 {
		if i := strings.LastIndexByte(target, ':'); i >= 0 {
			n, err := strconv.ParseUint(target[i+1:], 10, 16)
			if err == nil {
				port = uint32(n)
			}
		}
	}
	if port == 0 || port > 65535 {
		return ""
	}
	name := fqn + ":" + strconv.Itoa(int(port))
	svc, ns, ok := parseCanonical(name)
	if !ok || svc != strings.ToLower(res.GetName()) || ns != strings.ToLower(res.GetNamespace()) {
		return ""
	}
	return name
}

// parseCanonical checks that name has the form NAME.NAMESPACE.svc.DOMAIN:PORT
// (lower case DNS labels, a port from 1 to 65535, at most 253 characters
// before the port) and returns the Service's name and namespace.
func parseCanonical(name string) (svc, ns string, ok bool) {
	host, port, found := strings.Cut(name, ":")
	if !found || len(host) > 253 {
		return "", "", false
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || strconv.FormatUint(n, 10) != port {
		return "", "", false
	}
	labels := strings.Split(host, ".")
	if len(labels) < 4 || labels[2] != "svc" {
		return "", "", false
	}
	for _, l := range labels {
		if !dnsname.Label(l) {
			return "", "", false
		}
	}
	return labels[0], labels[1], true
}

// svcNames are what a service's route metrics and requests call it.
type svcNames struct {
	// dst is the dst label of its route series: the canonical name, or
	// the target when there is none (budgeted).
	dst string
	// canonical is the Service's FQDN:PORT from discovery, "" when the
	// target is not known as a Service.
	canonical string
	// routes are the route series by route name, under dst.
	routes reqmetrics.Cache[string, *reqmetrics.Series]
}

// setCanonical records the canonical name discovery gave the service
// (from its profile); the route series start over under the new dst.
func (s *Service) setCanonical(c string) {
	if cur := s.names.Load(); cur != nil && cur.canonical == c {
		return
	}
	dst := s.label
	if c != "" {
		dst = s.st.s.Metrics.HTTP.Targets.Admit(c)
	}
	s.names.Store(&svcNames{dst: dst, canonical: c})
}

// inboundProfiles follows the profiles of the names peer proxies put in
// l5d-dst-canonical, at most maxInboundProfiles of them for the proxy's
// lifetime.
type inboundProfiles struct {
	st *State
	mu sync.RWMutex
	m  map[string]*inboundProfile
}

// inboundProfile is the followed profile of one name.
type inboundProfile struct {
	ready chan struct{}
	once  sync.Once
	state atomic.Pointer[inboundProfileState]
}

// inboundProfileState is what discovery last said about a name.
type inboundProfileState struct {
	// known: the name is a Service's canonical name.
	known bool
	// router selects the profile's routes (nil without a usable profile).
	router *route.Router
}

// lookup returns what discovery says about name, waiting up to the
// resolve timeout for its first answer; nil when name is not of the
// canonical form, the proxy has no profile source, the bound of followed
// names is reached, or no answer came in time.
func (ps *inboundProfiles) lookup(ctx context.Context, name string) *inboundProfileState {
	if ps.st.s.Profiles == nil || name == "" {
		return nil
	}
	ps.mu.RLock()
	e := ps.m[name]
	ps.mu.RUnlock()
	if e == nil {
		// Only names of the canonical form are followed (so the map holds
		// nothing else, and a followed name needs no parsing).
		if _, _, ok := parseCanonical(name); !ok {
			return nil
		}
		ps.mu.Lock()
		if e = ps.m[name]; e == nil {
			if len(ps.m) >= maxInboundProfiles {
				ps.mu.Unlock()
				return nil
			}
			e = &inboundProfile{ready: make(chan struct{})}
			ps.m[name] = e
			go watchSource(ps.st.s.Lifetime(), ps.st, "inbound profile", name, ps.st.s.Profiles.Watch, func(v *pdst.DestinationProfile, _ bool) {
				e.update(ps.st.s.Log, v, name)
			})
		}
		ps.mu.Unlock()
	}
	select {
	case <-e.ready:
	default:
		t := time.NewTimer(ps.st.s.ResolveTimeout)
		defer t.Stop()
		select {
		case <-e.ready:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return e.state.Load()
}

// update records a profile answer for name; a profile whose routes do not
// compile keeps the last routes.
func (e *inboundProfile) update(log *slog.Logger, v *pdst.DestinationProfile, name string) {
	st := &inboundProfileState{known: v != nil && canonicalName(v, name) == name}
	if st.known {
		r, err := route.Compile(nil, v, name)
		if err != nil {
			log.Warn("inbound profile refused, keeping the last routes", "name", name, "err", err)
			if old := e.state.Load(); old != nil {
				st.router = old.router
			}
		} else {
			st.router = r
		}
	}
	e.state.Store(st)
	e.once.Do(func() { close(e.ready) })
}

// InboundRoute returns the dst label, the profile route name and that
// route's response classes of an inbound request whose peer proxy named
// the Service name: ("", "default", nil) unless discovery knows name as
// a Service.
func (st *State) InboundRoute(ctx context.Context, name, method, path string) (dst, rt string, classes []route.ResponseClass) {
	ip := st.inProfiles.lookup(ctx, name)
	if ip == nil || !ip.known {
		return "", defaultRouteName, nil
	}
	dst = st.s.Metrics.HTTP.InboundDst.Admit(name)
	if ip.router == nil {
		return dst, defaultRouteName, nil
	}
	r := ip.router.Select(route.Request{Method: method, Path: path})
	return dst, r.Name, r.Classes
}
