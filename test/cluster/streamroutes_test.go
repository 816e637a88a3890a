//go:build clusterintegration

package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	tcpRouteGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Resource: "tcproutes"}
	tlsRouteGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Resource: "tlsroutes"}
)

// tcpAndTLSRoutes routes client's connections to frontend's Service with
// Gateway API TCPRoute and TLSRoute, as Linkerd users write them
// (v1alpha2), the CRDs applied for the step: a TCPRoute on the echo port
// sends every connection to the backend of weight 100 (backend, then,
// with the weights swapped, intruder); TLSRoutes on the TLS echo port send
// by the ClientHello's server name (backend.example to backend,
// intruder.example to intruder, end to end TLS the proxy does not
// terminate), and a name no route has is refused. Frontend's own
// endpoints never answer.
func (m *mesh) tcpAndTLSRoutes(t *testing.T) {
	e := m.e
	ns := m.app
	client := m.pods["client"]
	m.installGatewayCRDs(t)

	parent := func(port int) []any {
		return []any{map[string]any{"group": "core", "kind": "Service", "name": "frontend", "port": port}}
	}
	// int64: unstructured values are JSON's (SetNestedSlice deep-copies).
	backend := func(name string, port, weight int) map[string]any {
		return map[string]any{"name": name, "port": int64(port), "weight": int64(weight)}
	}
	tcp := map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TCPRoute",
		"metadata": map[string]any{"name": "echo-split"},
		"spec": map[string]any{
			"parentRefs": parent(tcpPort),
			"rules":      []any{map[string]any{"backendRefs": []any{backend("backend", tcpPort, 100), backend("intruder", tcpPort, 0)}}},
		},
	}
	tls := func(name, host string) map[string]any {
		return map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TLSRoute",
			"metadata": map[string]any{"name": "by-sni-" + name},
			"spec": map[string]any{
				"parentRefs": parent(tlsPort),
				"hostnames":  []any{host},
				"rules":      []any{map[string]any{"backendRefs": []any{backend(name, tlsPort, 1)}}},
			},
		}
	}
	objs := []policyObject{{tcpRouteGVR, tcp}, {tlsRouteGVR, tls("backend", "backend.example")}, {tlsRouteGVR, tls("intruder", "intruder.example")}}
	t.Cleanup(func() { m.deleteObjects(t, ns, objs) })
	ctx := timeout(t, time.Minute)
	for _, p := range objs {
		_, err := e.dyn.Resource(p.gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: p.obj}, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s %v", p.obj["kind"], p.obj["metadata"])
	}

	echo := fmt.Sprintf("frontend:%d", tcpPort)
	tlsAddr := fmt.Sprintf("frontend:%d", tlsPort)
	// A new connection each time: the route applies per connection.
	landsOn := func(want string) func(context.Context) error {
		return func(ctx context.Context) error {
			for i := 0; i < 5; i++ {
				marker := "weft-tcproute-" + randomSuffix()
				reply, errText, err := e.tcpExchange(ctx, client, echo, marker)
				if err != nil {
					return err
				}
				if reply != want+" "+marker {
					return fmt.Errorf("connection %d to %s: reply %q, error %q; want %s's echo", i, echo, reply, errText, want)
				}
			}
			return nil
		}
	}
	eventually(t, 2*time.Minute, "the TCPRoute sends every connection to backend", landsOn("backend"))

	// The weights swapped: every connection to intruder.
	eventually(t, time.Minute, "the TCPRoute's weights swapped", func(ctx context.Context) error {
		cur, err := e.dyn.Resource(tcpRouteGVR).Namespace(ns).Get(ctx, "echo-split", metav1.GetOptions{})
		if err != nil {
			return err
		}
		rules := []any{map[string]any{"backendRefs": []any{backend("backend", tcpPort, 0), backend("intruder", tcpPort, 100)}}}
		if err := unstructured.SetNestedSlice(cur.Object, rules, "spec", "rules"); err != nil {
			return err
		}
		_, err = e.dyn.Resource(tcpRouteGVR).Namespace(ns).Update(ctx, cur, metav1.UpdateOptions{FieldValidation: "Strict"})
		return err
	})
	eventually(t, time.Minute, "the TCPRoute sends every connection to intruder", landsOn("intruder"))

	// By SNI.
	for _, name := range []string{"backend", "intruder"} {
		sni := name + ".example"
		eventually(t, 2*time.Minute, "the TLSRoute for "+sni, func(ctx context.Context) error {
			marker := "weft-tlsroute-" + randomSuffix()
			reply, errText, err := e.tlsExchange(ctx, client, tlsAddr, sni, marker)
			if err != nil {
				return err
			}
			if reply != name+" "+marker {
				return fmt.Errorf("SNI %s: reply %q, error %q; want %s's echo", sni, reply, errText, name)
			}
			return nil
		})
	}
	reply, errText, err := e.tlsExchange(timeout(t, time.Minute), client, tlsAddr, "nobody.example", "weft-tlsroute-unrouted")
	require.NoError(t, err)
	assert.Empty(t, reply, "a server name no TLSRoute has")
	assert.NotEmpty(t, errText, "a server name no TLSRoute has is refused")
	t.Logf("SNI nobody.example: %s", errText)
	assert.False(t, strings.Contains(reply, "frontend"), "frontend's own endpoints never answer")
	m.assertNoRestarts(t)
}
