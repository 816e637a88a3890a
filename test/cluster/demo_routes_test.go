//go:build clusterintegration

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
)

// demoRoutes gives the demo's api a ServiceProfile with a route per gRPC
// method and reads the routes back as a Linkerd user would: `weft viz
// routes deploy/web --to svc/api` (the client side, by the Service's name
// although web dials its ClusterIP) and `weft viz routes deploy/api` (the
// server side) show the failing method with its success rate (UnaryCall
// fails every 4th call: 75%), the other at 100%, every request over
// mutual TLS.
func (m *mesh) demoRoutes(t *testing.T, ns string) {
	grpcRoute := func(method string) spv1alpha2.RouteSpec {
		return spv1alpha2.RouteSpec{Name: method, Condition: &spv1alpha2.RequestMatch{
			Method: "POST", PathRegex: "/grpc\\.testing\\.TestService/" + method,
		}}
	}
	sp := &spv1alpha2.ServiceProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: spv1alpha2.SchemeGroupVersion.String(), Kind: "ServiceProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: "api." + ns + ".svc.cluster.local", Namespace: ns},
		Spec:       spv1alpha2.ServiceProfileSpec{Routes: []spv1alpha2.RouteSpec{grpcRoute("UnaryCall"), grpcRoute("EmptyCall")}},
	}
	m.e.applyObjects(t, []runtime.Object{sp})
	fqn := "api." + ns + ".svc.cluster.local:8090"

	// The profile applies to requests made after it reached the proxies:
	// a 10 s window sees only those once the route counts settle.
	check := func(rows map[string]routeRow, side string) error {
		for method, want := range map[string]float64{"UnaryCall": 0.75, "EmptyCall": 1} {
			r, ok := rows[method]
			switch {
			case !ok:
				return fmt.Errorf("%s: no row for route %s in %v", side, method, rows)
			case r.Authority != fqn:
				return fmt.Errorf("%s: route %s has authority %q, want %q", side, method, r.Authority, fqn)
			case r.Requests < 20:
				return fmt.Errorf("%s: route %s: %.0f requests in the window, want 20 or more", side, method, r.Requests)
			case r.SuccessRate == nil || math.Abs(*r.SuccessRate-want) > 0.1:
				return fmt.Errorf("%s: route %s: success rate %v, want %.2f (±0.10): %+v", side, method, r.SuccessRate, want, r)
			case r.MTLSShare == nil || *r.MTLSShare != 1:
				return fmt.Errorf("%s: route %s: mtlsShare %v, want 1 (every request over mutual TLS): %+v", side, method, r.MTLSShare, r)
			}
		}
		return nil
	}
	for _, to := range []string{"svc/api", "api." + ns + ".svc.cluster.local"} {
		eventually(t, 3*time.Minute, "viz routes deploy/web --to "+to+" shows api's routes", func(ctx context.Context) error {
			rows, err := m.vizRoutes(t, ns, "deploy/web", "--to", to)
			if err != nil {
				return err
			}
			return check(rows, "web --to "+to)
		})
	}
	eventually(t, 3*time.Minute, "viz routes deploy/api shows the routes it serves", func(ctx context.Context) error {
		rows, err := m.vizRoutes(t, ns, "deploy/api")
		if err != nil {
			return err
		}
		return check(rows, "api")
	})
}

// routeRow is one row of `weft viz routes -o json`.
type routeRow struct {
	Direction   string   `json:"direction"`
	Authority   string   `json:"authority"`
	Route       string   `json:"route"`
	Requests    float64  `json:"requests"`
	SuccessRate *float64 `json:"successRate"`
	MTLSShare   *float64 `json:"mtlsShare"`
}

// vizRoutes runs `weft viz routes RESOURCE -n ns -o json` over a 10 s
// window with the extra arguments and returns its rows by route name.
func (m *mesh) vizRoutes(t *testing.T, ns, resource string, extra ...string) (map[string]routeRow, error) {
	args := append([]string{"viz", "routes", resource, "-n", ns, "-o", "json", "--window", "10s"}, extra...)
	code, out, errs := m.e.weftCmd(t, nil, args...)
	if code != 0 {
		return nil, fmt.Errorf("weft %v: exit %d: %s", args, code, errs)
	}
	var doc struct {
		Routes []routeRow `json:"routes"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("weft viz routes: %w: %s", err, out)
	}
	rows := map[string]routeRow{}
	for _, r := range doc.Routes {
		rows[r.Route] = r
	}
	return rows, nil
}
