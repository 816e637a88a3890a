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
//
// Relative paths are resolved against the file's directory. Ports without a
// policy get the proxy's default inbound policy.
package static

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// File is the decoded file.
type File struct {
	Identity struct {
		Name         string `json:"name"`
		Certificate  string `json:"certificate"`
		Key          string `json:"key"`
		TrustAnchors string `json:"trustAnchors"`
	} `json:"identity"`
	Destinations map[string][]Endpoint `json:"destinations"`
	Policies     map[string]any        `json:"policies"`
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
	Identity *dataplane.StaticIdentity
	Resolver *dataplane.MemoryResolver
	Policies *dataplane.MemoryPolicies
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
		js, err := yaml.Marshal(v)
		if err == nil {
			js, err = yaml.YAMLToJSON(js)
		}
		if err != nil {
			return nil, bad("policies["+port+"]", err)
		}
		var srv inbound.Server
		if err := protojson.Unmarshal(js, &srv); err != nil {
			return nil, bad("policies["+port+"]", err)
		}
		pols.Set(uint32(n), &srv)
	}
	return &Sources{Identity: ident, Resolver: res, Policies: pols}, nil
}
