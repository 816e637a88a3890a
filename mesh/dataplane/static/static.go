// Package static feeds a Weft proxy from one file on disk instead of the
// control plane: the workload's certificate, the endpoints of the
// destinations it talks to, and the inbound policy of its ports. It is for
// development, demos on one machine and tests; the file is read once.
//
// The file is YAML (or JSON):
//
//	identity:
//	  name: web.shop.serviceaccount.identity.linkerd.cluster.local
//	  certificate: web.crt     # PEM: leaf first, then intermediates
//	  key: web.key             # PEM private key
//	  trustAnchors: roots.pem  # PEM bundle
//	destinations:
//	  "10.96.0.10:8080":       # authority or IP:port
//	    - address: 10.1.0.7:8080
//	      identity: api.shop.serviceaccount.identity.linkerd.cluster.local
//	      protocol: opaque      # "", h2 or opaque
//	      opaqueTransportPort: 4143
//	      weight: 1
//	policies:
//	  "8080":                  # the proxy API's inbound Server, in protobuf JSON form
//	    protocol: {detect: {}}
//	    authorizations:
//	      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}]
//	        authentication: {meshTLS: {identities: {identities: [{name: web.shop...}]}}}
//	outboundPolicies:          # optional: io.linkerd.proxy.outbound OutboundPolicy per target
//	  "api.shop.svc.cluster.local:8080":
//	    protocol: {detect: {timeout: 10s, http1: {routes: [...]}, http2: {routes: [...]}}}
//	profiles:                  # optional: io.linkerd.proxy.destination DestinationProfile per target
//	  "api.shop.svc.cluster.local:8080":
//	    retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10s}
//	    routes: [{condition: {path: {regex: "/api/.*"}}, isRetryable: true, timeout: 2s}]
//
// Relative paths are resolved against the file's directory. Ports without a
// policy get the proxy's default inbound policy. Every policy is checked
// with the evaluator the proxy uses, so a policy the proxy would refuse is
// an error naming its port; an authorization without metadata (handy in a
// hand-written file) is named after its port and position.
package static

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// File is the decoded file.
type File struct {
	Identity struct {
		Name         string `json:"name"`
		Certificate  string `json:"certificate"`
		Key          string `json:"key"`
		TrustAnchors string `json:"trustAnchors"`
	} `json:"identity"`
	Destinations     map[string][]Endpoint `json:"destinations"`
	Policies         map[string]any        `json:"policies"`
	OutboundPolicies map[string]any        `json:"outboundPolicies,omitempty"`
	Profiles         map[string]any        `json:"profiles,omitempty"`
}

// Endpoint is one endpoint in the file.
type Endpoint struct {
	Address             string `json:"address"`
	Identity            string `json:"identity,omitempty"`
	Protocol            string `json:"protocol,omitempty"`
	OpaqueTransportPort uint16 `json:"opaqueTransportPort,omitempty"`
	Weight              uint32 `json:"weight,omitempty"`
}

// Sources are the proxy inputs a file describes.
type Sources struct {
	Identity         *dataplane.StaticIdentity
	Resolver         *dataplane.MemoryResolver
	Policies         *dataplane.MemoryPolicies
	OutboundPolicies *dataplane.MemoryOutboundPolicies
	Profiles         *dataplane.MemoryProfiles
}

// Load reads and checks path. Errors name the file and the field.
func Load(path string) (*Sources, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	var f File
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("static: %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	bad := func(field string, err error) error { return fmt.Errorf("static: %s: %s: %w", path, field, err) }

	id := f.Identity
	if id.Name == "" {
		return nil, bad("identity.name", fmt.Errorf("missing"))
	}
	cert, err := tls.LoadX509KeyPair(rel(id.Certificate), rel(id.Key))
	if err != nil {
		return nil, bad("identity.certificate/key", err)
	}
	anchors, err := os.ReadFile(rel(id.TrustAnchors))
	if err != nil {
		return nil, bad("identity.trustAnchors", err)
	}
	roots, err := dataplane.ParseTrustAnchors(anchors)
	if err != nil {
		return nil, bad("identity.trustAnchors", err)
	}
	ident, err := dataplane.NewStaticIdentity(id.Name, cert, roots)
	if err != nil {
		return nil, bad("identity", err)
	}

	res := dataplane.NewMemoryResolver()
	for target, eps := range f.Destinations {
		var out []dataplane.Endpoint
		for i, e := range eps {
			field := fmt.Sprintf("destinations[%q][%d]", target, i)
			ap, err := netip.ParseAddrPort(e.Address)
			if err != nil {
				return nil, bad(field+".address", err)
			}
			hint := dataplane.ProtocolHint(e.Protocol)
			switch hint {
			case dataplane.HintUnknown, dataplane.HintH2, dataplane.HintOpaque:
			default:
				return nil, bad(field+".protocol", fmt.Errorf("%q is not one of \"\", h2, opaque", e.Protocol))
			}
			out = append(out, dataplane.Endpoint{Addr: ap, Identity: e.Identity, Protocol: hint, OpaqueTransportPort: e.OpaqueTransportPort, Weight: e.Weight})
		}
		res.Set(target, out...)
	}

	pols := dataplane.NewMemoryPolicies()
	for port, v := range f.Policies {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return nil, bad("policies["+port+"]", fmt.Errorf("not a port"))
		}
		var srv inbound.Server
		if err := decode(v, &srv); err != nil {
			return nil, bad("policies["+port+"]", err)
		}
		for i, az := range srv.Authorizations {
			if az.Metadata == nil && len(az.Labels) == 0 {
				az.Labels = map[string]string{"name": fmt.Sprintf("static-%s-%d", port, i)}
			}
		}
		if _, err := authz.FromProto(&srv); err != nil {
			return nil, bad("policies["+port+"]", err)
		}
		pols.Set(uint32(n), &srv)
	}

	outs := dataplane.NewMemoryOutboundPolicies()
	for target, v := range f.OutboundPolicies {
		var pol outbound.OutboundPolicy
		if err := decode(v, &pol); err != nil {
			return nil, bad("outboundPolicies["+target+"]", err)
		}
		if _, err := route.Compile(&pol, nil, target); err != nil {
			return nil, bad("outboundPolicies["+target+"]", err)
		}
		outs.Set(target, &pol)
	}
	profs := dataplane.NewMemoryProfiles()
	for target, v := range f.Profiles {
		var prof pdst.DestinationProfile
		if err := decode(v, &prof); err != nil {
			return nil, bad("profiles["+target+"]", err)
		}
		if _, err := route.Compile(nil, &prof, target); err != nil {
			return nil, bad("profiles["+target+"]", err)
		}
		profs.Set(target, &prof)
	}
	return &Sources{Identity: ident, Resolver: res, Policies: pols, OutboundPolicies: outs, Profiles: profs}, nil
}

// decode reads a YAML value in protobuf JSON form into m.
func decode(v any, m proto.Message) error {
	js, err := yaml.Marshal(v)
	if err == nil {
		js, err = yaml.YAMLToJSON(js)
	}
	if err != nil {
		return err
	}
	return protojson.Unmarshal(js, m)
}
