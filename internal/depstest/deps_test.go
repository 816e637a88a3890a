package depstest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/depstest"
)

const module = "github.com/weftmesh/weft"

func weft(p string) string { return module + "/" + p }

// Modules no package of the data plane or of a core may link.
var (
	clientGo = []string{"k8s.io/client-go/..."}
	caSDKs   = []string{"github.com/smallstep/...", "go.step.sm/..."}
	cloud    = []string{"cloud.google.com/...", "google.golang.org/api/...", "github.com/aws/...", "github.com/Azure/...", "github.com/googleapis/..."}
	// otelSDK is OpenTelemetry's SDK and exporters (and the OTLP protocol
	// they speak); its API alone (go.opentelemetry.io/otel,
	// .../otel/trace) is light and is linked through gRPC and k8s.io.
	otelSDK = []string{"go.opentelemetry.io/otel/sdk/...", "go.opentelemetry.io/otel/exporters/...", "go.opentelemetry.io/proto/otlp/..."}
)

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// rules is the dependency policy of the module. Each row names a set of
// packages and what they must never link. Keep it in step with the rule
// each arrow follows in docs/architecture.md.
var rules = []depstest.Rule{
	{
		Packages: []string{weft("mesh/dataplane/..."), weft("cmd/weft-proxy"), weft("cmd/weft-init"), weft("internal/cli/proxycmd")},
		Deny:     join(clientGo, caSDKs, cloud, []string{weft("mesh/inject/..."), weft("mesh/install/...")}),
		Why:      "the proxy links no Kubernetes client, no CA backend, no cloud SDK and not the injector",
	},
	{
		Packages: []string{
			weft("cmd/weft-proxy"), weft("internal/cli/proxycmd"), weft("mesh/dataplane/..."),
			weft("mesh/discovery/model"), weft("mesh/discovery/client"),
		},
		Deny: []string{"k8s.io/..."},
		Why:  "the proxy links nothing of k8s.io: its package init and text pages cost every proxy memory (docs/benchmarks.md)",
	},
	{
		Packages: []string{weft("mesh/dataplane/..."), weft("internal/cli/proxycmd"), weft("cmd/weft-init")},
		Except:   []string{weft("mesh/dataplane/tracing/otlpexport")},
		Deny:     otelSDK,
		Why:      "only weft-proxy links OpenTelemetry's SDK, through mesh/dataplane/tracing/otlpexport (wired by internal/cli/proxytrace): the data plane records spans through its Tracer seam, and weft-init, which shares the proxy's command package, stays without it",
	},
	{
		Packages: []string{weft("...")},
		Except: []string{
			weft("mesh/dataplane/tracing/otlpexport"), weft("internal/cli/proxytrace"), weft("cmd/weft-proxy"),
			weft("internal/testutil/otlptest"), // the tests' collector: the OTLP protocol, not the SDK (next rule)
			weft("test/cluster/testapp"),       // the cluster suite's application, whose --otlp mode runs that collector in a pod
		},
		Deny: otelSDK,
		Why:  "OpenTelemetry's SDK is the proxy's exporter alone (docs/tracing.md); no other package or program links it",
	},
	{
		Packages: []string{weft("internal/testutil/otlptest")},
		Deny:     []string{"go.opentelemetry.io/otel/sdk/...", "go.opentelemetry.io/otel/exporters/..."},
		Why:      "the tests' OTLP collector is built on the protocol's own gRPC service, so that it checks what the SDK sends rather than sharing its code",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/trace")},
		Deny:     []string{depstest.All},
		Allow:    []string{depstest.Std},
		Why:      "the trace-context parser and the tracing seam import only the standard library",
	},
	{
		Packages: []string{weft("mesh/dataplane/endpoint")},
		Deny:     []string{depstest.All},
		Allow:    []string{depstest.Std},
		Why:      "the endpoint value discovery hands the proxy (dataplane.Endpoint is an alias of it) sits below dataplane so that the proxy's packages by concern (outbound HTTP) can name it: it imports only the standard library, nothing of dataplane's internals",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/clienthello")},
		Deny:     []string{depstest.All},
		Allow:    []string{depstest.Std},
		Why:      "the ClientHello reader, which reads hostile bytes, imports only the standard library (crypto/tls parses them)",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/relay")},
		Deny:     []string{depstest.All},
		Allow:    []string{depstest.Std, "golang.org/x/sys/..."},
		Why:      "the proxy's L4 relay and idle poller import only the standard library and x/sys: nothing of HTTP, metrics or Weft",
	},
	{
		Packages: []string{
			weft("mesh/dataplane/internal/metricstore"), weft("mesh/dataplane/internal/relay"), weft("mesh/dataplane/internal/tap"),
			weft("mesh/dataplane/internal/reqmetrics"),
		},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/h1"), weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"),
			weft("mesh/dataplane/internal/h2hdr"), weft("mesh/dataplane/route"), weft("mesh/dataplane/balance"), weft("mesh/dataplane/retry"),
		},
		Why: "the proxy's packages by concern (metric store, request metrics, relay, tap) take values and small seams from the dataplane package, never the package itself or its HTTP proxying, routing and balancing",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/httpcore")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/route"), weft("mesh/dataplane/balance"), weft("mesh/dataplane/retry"),
			weft("mesh/dataplane/internal/tap"), weft("mesh/dataplane/internal/reqmetrics"), weft("mesh/dataplane/internal/metricstore"),
			weft("mesh/policy/..."),
		},
		Why: "the HTTP vocabulary both directions share (mesh headers, the proxy's own answers, the forwarded request, body and response) knows nothing of policy, routing, balancing, metrics or tap",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/inbound")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/outbound"),
			weft("mesh/dataplane/transport"),
			weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"), weft("mesh/dataplane/internal/h2hdr"),
			weft("mesh/discovery/..."),
		},
		// It links mesh/dataplane/route for the profile route's response
		// classes, and route links balance and retry (a route's backends
		// and retry policy): those two cannot be denied here.
		Why: "the inbound HTTP side is given the policy cache, the profile routes and the clients to the application as seams by the dataplane package; it links neither that package, the outbound side, the transport header, the HTTP/2 server and client, nor discovery",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/outbound")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/inbound"),
			weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"), weft("mesh/dataplane/internal/h2hdr"),
			weft("mesh/discovery/..."),
		},
		// It links mesh/dataplane/transport: an upgrade to a meshed
		// endpoint announces HTTP/1 in the transport header its dial
		// writes.
		Why: "the outbound HTTP side is given the round trip over the pools, the dials and the destination's Service as seams by the dataplane package; it links neither that package, the inbound side, the HTTP/2 server and client, nor discovery",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/framerelay")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/inbound"), weft("mesh/dataplane/internal/outbound"),
			weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"), weft("mesh/dataplane/internal/h2hdr"),
			weft("mesh/dataplane/internal/upstream"),
			weft("mesh/discovery/..."),
		},
		// Request metrics and tap label a request with its authorization
		// (mesh/policy's types), so policy cannot be denied here.
		Why: "the end of a frame-path call, shared by both directions, links the HTTP vocabulary, the route's response classes, the request metrics and tap; neither direction's HTTP side, the HTTP/2 server or client, the pools nor discovery",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/upstream")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/inbound"), weft("mesh/dataplane/internal/outbound"),
			weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/tap"), weft("mesh/dataplane/internal/reqmetrics"),
			weft("mesh/dataplane/route"), weft("mesh/dataplane/balance"), weft("mesh/dataplane/retry"),
			weft("mesh/discovery/..."), weft("mesh/policy/..."),
		},
		// It links the HTTP codecs (h1, h2client), httpcore's errors,
		// relay's socket peek, the endpoint value and the transport
		// header's protocols; metricstore is allowed (the transport labels
		// are built by the Dialer's Count today, in dataplane).
		Why: "the pools to upstreams are given the proxy's dials, transport metrics and limits as a Dialer and Settings by the dataplane package; they link neither that package, either direction's HTTP side, the HTTP/2 server, routing, request metrics, tap, policy nor discovery",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/connmetrics")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/inbound"), weft("mesh/dataplane/internal/outbound"),
			weft("mesh/dataplane/internal/h1"), weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"),
			weft("mesh/dataplane/internal/upstream"), weft("mesh/dataplane/internal/framerelay"),
			weft("mesh/dataplane/internal/tap"), weft("mesh/dataplane/internal/accesslog"),
			weft("mesh/dataplane/route"), weft("mesh/dataplane/balance"), weft("mesh/dataplane/retry"),
			weft("mesh/discovery/..."),
		},
		// It links the store and the request series it registers
		// (metricstore, reqmetrics), relay's test for a use of a closed
		// connection, the endpoint value and mesh/policy/authz (the peer
		// and Server the inbound labels are built from).
		Why: "the connection metrics are given their labels' values and the proxy's certificate by the dataplane package; they link neither that package, either direction's HTTP side, the HTTP servers and clients, the pools, tap, the access log, routing nor discovery",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/accesslog")},
		Deny:     []string{weft("...")},
		// httpcore (the l5d-orig-proto rule) links h1 and relay itself.
		Allow: []string{weft("mesh/dataplane/internal/httpcore"), weft("mesh/dataplane/internal/h1"), weft("mesh/dataplane/internal/relay")},
		Why:   "the access log, which writes peer-controlled strings, reads a request and writes a line: of Weft it links httpcore's vocabulary alone, nothing that serves, routes, authorizes or counts requests",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/watch")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/inbound"), weft("mesh/dataplane/internal/outbound"),
			weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"), weft("mesh/dataplane/internal/h1"),
			weft("mesh/dataplane/internal/httpcore"), weft("mesh/dataplane/internal/upstream"), weft("mesh/dataplane/internal/framerelay"),
			weft("mesh/dataplane/internal/relay"), weft("mesh/dataplane/internal/tap"), weft("mesh/dataplane/internal/reqmetrics"),
			weft("mesh/dataplane/internal/metricstore"),
			weft("mesh/dataplane/route"), weft("mesh/dataplane/balance"), weft("mesh/dataplane/retry"), weft("mesh/dataplane/transport"),
			weft("mesh/discovery/..."), weft("mesh/policy/..."),
			"github.com/prometheus/...",
		},
		// It links the endpoint value and the inbound policy message
		// (apis/proxy/inbound, whose gRPC service file links grpc-go):
		// the values its sources send.
		Why: "the discovery and policy caches are given their sources, the run context, timeouts, a logger and the policy's compile step by the dataplane package; they link neither that package, either direction's HTTP side, the HTTP codecs, the pools, the relay, routing, balancing, metrics, tap, policy nor the discovery clients",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/l4")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/discovery/..."), weft("mesh/identity/..."),
			"k8s.io/...",
		},
		// It links everything a connection meets on its way: detection,
		// the transport header, the relay, both directions' HTTP sides,
		// the HTTP/2 server and client, the pools, the state the control
		// plane gave (internal/meshstate), metrics, tap, the access log
		// and the tracer.
		Why: "the connection paths are given their configuration, mesh TLS, state, metrics and hooks by the dataplane package; they link neither that package, the discovery clients nor the identity backends (a peer's identity comes from the TLS settings they are given)",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/meshstate")},
		Deny: []string{
			weft("mesh/dataplane"), weft("mesh/dataplane/control"), weft("mesh/dataplane/static"),
			weft("mesh/dataplane/internal/h2server"), weft("mesh/dataplane/internal/h2client"),
			weft("mesh/dataplane/internal/upstream"), weft("mesh/dataplane/internal/accesslog"),
			weft("mesh/discovery/..."),
		},
		// It links the caches (internal/watch), the connection and
		// request metrics its series are made in, routing, balancing and
		// retry budgets (what a Service is), internal/outbound (a Service
		// is its outboundhttp.Service, a backend its Backend),
		// internal/inbound (a port's Policy and rate limits, which links
		// tap and the frame path's vocabulary) and mesh/policy/authz (a
		// compiled port policy).
		Why: "the proxy's control-plane state is given its sources, run context, timeouts, policy compile step, metrics and logger by the dataplane package; it links neither that package, the HTTP/2 server or client, the pools, the access log nor the discovery clients",
	},
	{
		Packages: []string{weft("mesh/dataplane/internal/metricstore"), weft("mesh/dataplane/internal/relay"), weft("mesh/dataplane/internal/reqmetrics")},
		Deny:     []string{weft("mesh/dataplane/internal/tap")},
		Why:      "the metric store, the request metrics and the relay sit below tap: tap renders its labels with the store's builders, never the other way round",
	},
	{
		Packages: []string{
			weft("mesh/policy/authz"), weft("mesh/policy/pathnorm"),
			weft("mesh/identity"), weft("mesh/identity/pki"), weft("mesh/identity/localca"),
			weft("mesh/identity/client"), weft("mesh/identity/static"), weft("mesh/identity/identitytest"),
		},
		Deny: []string{"k8s.io/..."},
		Why:  "the authorization and identity cores link nothing of k8s.io",
	},
	{
		Packages: []string{
			weft("mesh/policy"), weft("mesh/policy/static"), weft("mesh/policy/policytest"),
			weft("mesh/discovery"), weft("mesh/discovery/static"), weft("mesh/discovery/client"), weft("mesh/discovery/resolver"),
			weft("mesh/local/..."), weft("cmd/weft-policy"), weft("internal/cli/policycmd"),
		},
		Deny: join(clientGo, caSDKs, cloud, []string{weft("mesh/inject/..."), weft("mesh/install/...")}),
		Why:  "the policy and discovery cores, their static backends and the local mesh link no Kubernetes client, no CA backend and not the injector",
	},
	{
		Packages: []string{weft("mesh/viz"), weft("mesh/viz/tapapi")},
		Deny:     []string{"k8s.io/..."},
		Why:      "the viz core and the tap API link nothing of k8s.io: their Kubernetes side is mesh/viz/kubernetes",
	},
	{
		Packages: []string{weft("mesh/internal/...")},
		Deny:     []string{weft("...")},
		Why:      "the helpers every capability shares import nothing of Weft",
	},
	{
		Packages: []string{weft("apis/...")},
		Deny:     []string{weft("mesh/..."), weft("internal/..."), weft("cmd/...")},
		Why:      "apis/ imports nothing from mesh/",
	},
	{
		Packages: []string{weft("mesh/internal/routematch")},
		Deny:     []string{depstest.All},
		Allow:    []string{depstest.Std},
		Why:      "the route matcher the outbound router and the inbound evaluator share imports only the standard library",
	},
	{
		Packages: []string{weft("apis/vocab"), weft("mesh/identity/certpem")},
		Deny:     []string{depstest.All},
		Allow:    []string{depstest.Std},
		Why:      "shared vocabulary and the PEM reader import only the standard library",
	},
}

func TestPackagesLinkOnlyWhatTheirRulesAllow(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the module's import graph with go list")
	}
	g, err := depstest.Load("../..", module, "./...")
	require.NoError(t, err)
	for i := range rules {
		r := &rules[i]
		for _, p := range r.Packages {
			require.NotEmpty(t, g.Bound(&depstest.Rule{Packages: []string{p}}), "rule %d (%s): %s matches no package: misspelt, or the package moved", i, r.Why, p)
		}
		for _, v := range g.Check(r) {
			t.Error(v.String())
		}
	}
}

// The checker itself, on a graph small enough to read.
func TestCheckNamesTheShortestChainToADeniedPackage(t *testing.T) {
	g := &depstest.Graph{
		Imports: map[string][]string{
			"m/proxy":                     {"m/core", "fmt"},
			"m/core":                      {"m/vocab", "m/kube"},
			"m/kube":                      {"k8s.io/client-go/kubernetes", "k8s.io/api/core/v1"},
			"m/vocab":                     nil,
			"m/clean":                     {"fmt"},
			"fmt":                         nil,
			"k8s.io/api/core/v1":          nil,
			"k8s.io/client-go/kubernetes": {"k8s.io/api/core/v1"},
		},
		Local: []string{"m/clean", "m/core", "m/kube", "m/proxy", "m/vocab"},
	}
	r := depstest.Rule{Packages: []string{"m/proxy", "m/clean"}, Deny: []string{"k8s.io/client-go/..."}, Why: "no client"}
	v := g.Check(&r)
	require.Len(t, v, 1, "m/clean is clean")
	assert.Equal(t, []string{"m/proxy", "m/core", "m/kube", "k8s.io/client-go/kubernetes"}, v[0].Chain)
	assert.Equal(t, 1, v[0].Denied)
	msg := v[0].String()
	assert.True(t, strings.HasPrefix(msg, "m/proxy must not link k8s.io/client-go/kubernetes (no client):"), msg)
	assert.Contains(t, msg, "-> m/kube\n")

	all := depstest.Rule{Packages: []string{"m/..."}, Except: []string{"m/kube", "m/core", "m/proxy"}, Deny: []string{depstest.All}, Allow: []string{depstest.Std}, Why: "std only"}
	assert.Empty(t, g.Check(&all), "m/vocab and m/clean import only the standard library")
	k8s := depstest.Rule{Packages: []string{"m/core"}, Deny: []string{"k8s.io/..."}, Allow: []string{"k8s.io/api/..."}, Why: "no k8s but api"}
	v = g.Check(&k8s)
	require.Len(t, v, 1)
	assert.Equal(t, "k8s.io/client-go/kubernetes", v[0].Chain[len(v[0].Chain)-1])
	assert.Equal(t, []string{"m/clean", "m/core", "m/kube", "m/proxy", "m/vocab"}, g.Bound(&depstest.Rule{Packages: []string{"m/..."}}))
}

func TestMatchReadsPatternsAsGoDoes(t *testing.T) {
	assert.True(t, depstest.Match("k8s.io/client-go/...", "k8s.io/client-go"))
	assert.True(t, depstest.Match("k8s.io/client-go/...", "k8s.io/client-go/kubernetes"))
	assert.False(t, depstest.Match("k8s.io/client-go/...", "k8s.io/client-gopher"))
	assert.False(t, depstest.Match("m/a", "m/a/b"))
	assert.True(t, depstest.Match(depstest.Std, "net/http"))
	assert.True(t, depstest.Match(depstest.Std, "vendor/golang.org/x/net/http2/hpack"))
	assert.False(t, depstest.Match(depstest.Std, "golang.org/x/net/http2"))
	assert.True(t, depstest.Match(depstest.All, "anything/at/all"))
}
