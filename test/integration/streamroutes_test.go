//go:build kubeintegration

package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// TLSRoutes and TCPRoutes created in a real API server at v1alpha2 (as
// Linkerd's manifests write them; the experimental-channel CRDs Weft
// vendors serve it beside v1) reach the index through a real watch (the
// source reads them at v1, the API server converting) and are served on
// the Outbound API: a TLSRoute makes its Service port Tls with the
// route's SNIs and weighted backends, a TCPRoute makes another port
// Opaque, a TLSRoute with two rules is accepted by the schema and refused
// by the translation (what Weft's webhook, off here, answers), and
// deleting the TLSRoute gives the port back its HTTP detection.
func TestTCPRoutesAndTLSRoutesCreatedInTheAPIServerAreServedOnTheOutboundAPI(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 2*time.Minute)
	ns := newNamespace(t, c, "streamroutes", nil, nil)
	for _, s := range []struct {
		name  string
		ports []int32
	}{{"parent", []int32{443, 7000}}, {"blue", []int32{8443}}, {"green", []int32{8443}}} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: ns}}
		for _, p := range s.ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "p" + string(rune('a'+len(svc.Spec.Ports))), Port: p})
		}
		_, err := c.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		require.NoError(t, err, s.name)
	}

	src, err := policykube.New(ctx, c.kube, c.dyn, policykube.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	assert.True(t, src.GatewayAPIWatched()["tlsroutes.gateway.networking.k8s.io"], "the TLSRoute CRD is watched")
	assert.True(t, src.GatewayAPIWatched()["tcproutes.gateway.networking.k8s.io"], "the TCPRoute CRD is watched")
	runCtx, stop := context.WithCancel(context.Background())
	x, err := policy.NewIndexer(runCtx, src)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = x.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	out, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	out.Register(gs)
	lis := testutil.Listen(t)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	watch := func(port string) grpc.ServerStreamingClient[outbound.OutboundPolicy] {
		stream, err := outbound.NewOutboundPoliciesClient(conn).Watch(ctx, &outbound.TrafficSpec{
			SourceWorkload: ns + ":client-0",
			Target:         &outbound.TrafficSpec_Authority{Authority: "parent." + ns + ".svc.cluster.local:" + port},
		})
		require.NoError(t, err)
		return stream
	}
	// next reads the stream until cond holds.
	next := func(stream grpc.ServerStreamingClient[outbound.OutboundPolicy], cond func(*outbound.OutboundPolicy) bool, what string) *outbound.OutboundPolicy {
		t.Helper()
		for {
			p, err := stream.Recv()
			require.NoError(t, err, what)
			if cond(p) {
				return p
			}
		}
	}
	tlsStream, tcpStream := watch("443"), watch("7000")
	next(tlsStream, func(p *outbound.OutboundPolicy) bool { return p.GetProtocol().GetDetect() != nil }, "port 443 before any route")
	next(tcpStream, func(p *outbound.OutboundPolicy) bool { return p.GetProtocol().GetDetect() != nil }, "port 7000 before any route")

	applyYAML(t, c, policykube.TLSRoutesResource, ns, `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: by-sni}
spec:
  parentRefs: [{group: core, kind: Service, name: parent, port: 443}]
  hostnames: [blue.example.com, "*.green.example.com"]
  rules:
  - backendRefs:
    - {name: blue, port: 8443, weight: 3}
    - {name: green, port: 8443, weight: 1}
    - {name: missing, port: 8443}
`)
	p := next(tlsStream, func(p *outbound.OutboundPolicy) bool { return p.GetProtocol().GetTls() != nil }, "the TLSRoute")
	routes := p.GetProtocol().GetTls().GetRoutes()
	require.Len(t, routes, 1)
	md := routes[0].GetMetadata().GetResource()
	assert.Equal(t, []string{"gateway.networking.k8s.io", "TLSRoute", ns, "by-sni"}, []string{md.GetGroup(), md.GetKind(), md.GetNamespace(), md.GetName()})
	require.Len(t, routes[0].GetSnis(), 2)
	assert.Equal(t, "blue.example.com", routes[0].GetSnis()[0].GetExact())
	assert.Equal(t, []string{"com", "example", "green"}, routes[0].GetSnis()[1].GetSuffix().GetReverseLabels())
	wbs := routes[0].GetRules()[0].GetBackends().GetRandomAvailable().GetBackends()
	require.Len(t, wbs, 3)
	assert.Equal(t, uint32(3), wbs[0].GetWeight())
	assert.Equal(t, "blue."+ns+".svc.cluster.local:8443", wbs[0].GetBackend().GetBackend().GetBalancer().GetDiscovery().GetDst().GetPath())
	assert.Equal(t, uint32(1), wbs[1].GetWeight())
	assert.Equal(t, "green."+ns+".svc.cluster.local:8443", wbs[1].GetBackend().GetBackend().GetBalancer().GetDiscovery().GetDst().GetPath())
	require.Len(t, wbs[2].GetBackend().GetFilters(), 1)
	assert.NotEmpty(t, wbs[2].GetBackend().GetFilters()[0].GetInvalid().GetMessage(), "the missing Service is an invalid backend")

	applyYAML(t, c, policykube.TCPRoutesResource, ns, `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: db}
spec:
  parentRefs: [{group: core, kind: Service, name: parent, port: 7000}]
  rules:
  - backendRefs: [{name: blue, port: 8443}]
`)
	p = next(tcpStream, func(p *outbound.OutboundPolicy) bool { return p.GetProtocol().GetOpaque() != nil }, "the TCPRoute")
	oroutes := p.GetProtocol().GetOpaque().GetRoutes()
	require.Len(t, oroutes, 1)
	assert.Equal(t, "db", oroutes[0].GetMetadata().GetResource().GetName())

	applyYAML(t, c, policykube.TLSRoutesResource, ns, `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: two-rules}
spec:
  parentRefs: [{group: core, kind: Service, name: parent, port: 443}]
  rules: [{backendRefs: [{name: blue, port: 8443}]}, {backendRefs: [{name: green, port: 8443}]}]
`)
	waitFor(t, time.Now(), x.Updated(), func() bool {
		for _, p := range x.Index().Errors() {
			if p.Object.Name == "two-rules" && p.Field == "spec.rules" {
				return true
			}
		}
		return false
	}, "the TLSRoute with two rules is refused")

	// The status, as Linkerd's controller writes it for a Service parent:
	// accepted, and ResolvedRefs false for the missing backend; read back
	// at v1alpha2.
	startStatusWriter(t, c, newNamespace(t, c, "streamroutes-cp", nil, nil), "writer-a")
	conditions := func() map[string]string {
		u, err := c.dyn.Resource(policykube.TLSRoutesResource).Namespace(ns).Get(ctx, "by-sni", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
		out := map[string]string{}
		for _, p := range parents {
			pm, _ := p.(map[string]any)
			if pm["controllerName"] != policy.ControllerName {
				continue
			}
			conds, _ := pm["conditions"].([]any)
			for _, c := range conds {
				cm, _ := c.(map[string]any)
				out[fmt.Sprint(cm["type"])] = fmt.Sprint(cm["status"], "/", cm["reason"])
			}
		}
		return out
	}
	waitFor(t, time.Now(), x.Updated(), func() bool {
		got := conditions()
		return got["Accepted"] == "True/Accepted" && got["ResolvedRefs"] == "False/BackendNotFound"
	}, "the TLSRoute's status says accepted, with a backend not found")

	require.NoError(t, c.dyn.Resource(policykube.TLSRoutesResource).Namespace(ns).Delete(ctx, "by-sni", metav1.DeleteOptions{}))
	next(tlsStream, func(p *outbound.OutboundPolicy) bool { return p.GetProtocol().GetDetect() != nil }, "the port detects HTTP again once the TLSRoute is gone")
	assert.Empty(t, src.Errors(), "objects the policy source could not convert")
}
