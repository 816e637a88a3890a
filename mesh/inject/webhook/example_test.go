package webhook_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// Wiring both webhooks behind one TLS server, as `weft-controller injector`
// does. The certificate paths are the caller's.
func ExampleNewInjector() {
	values := inject.DefaultValues()
	anchors, err := os.ReadFile("/var/run/weft/identity/trust-roots/ca-bundle.crt")
	if err != nil {
		fmt.Println(err)
		return
	}
	values.IdentityTrustAnchorsPEM = string(anchors)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	namespaces := inject.NewStaticNamespaces() // or kubernetes.NewNamespaces(ctx, clientset)

	reg := prometheus.NewRegistry() // served on its own listener, as --metrics-addr does
	metrics, err := webhook.NewPrometheusMetrics(reg)
	if err != nil {
		fmt.Println(err)
		return
	}

	injector, err := webhook.NewInjector(values, namespaces, webhook.WithLogger(logger), webhook.WithMetrics(metrics))
	if err != nil {
		fmt.Println(err)
		return
	}
	validator, err := webhook.NewValidator(webhook.WithLogger(logger), webhook.WithMetrics(metrics))
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/inject", injector)
	mux.Handle("/validate", validator)
	srv := &http.Server{Addr: ":8443", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	_ = srv.ListenAndServeTLS("/var/run/weft/tls/tls.crt", "/var/run/weft/tls/tls.key")
}

// Validate is the pure check behind the validating webhook.
func ExampleValidate() {
	sp := &spv1alpha2.ServiceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "web.shop.svc.cluster.local", Namespace: "shop"},
		Spec: spv1alpha2.ServiceProfileSpec{
			Routes:      []spv1alpha2.RouteSpec{{Name: "GET /", Condition: &spv1alpha2.RequestMatch{PathRegex: "/api/("}}},
			RetryBudget: &spv1alpha2.RetryBudget{RetryRatio: 0.2, MinRetriesPerSecond: 10, TTL: "10s"},
		},
	}
	for _, e := range webhook.Validate(sp) {
		fmt.Println(e.Field)
	}
	// Output:
	// spec.routes[0].condition.pathRegex
}
