package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// A consumer route end to end: Service data/db has a producer TCPRoute to
// db-primary, and namespace shop has its own (consumer) TCPRoute for
// data/db to db-replica. Two proxies ask one real policy controller: the
// proxy of a pod in shop (its context token says shop) sends db's
// connections to db-replica, the proxy of a pod in ops sends them to
// db-primary, over real sockets. A port serves one TCPRoute, the oldest:
// the consumer route is the older here.
func TestAConsumerRouteSteersOnlyTheClientsOfItsNamespace(t *testing.T) {
	const authority = "db.data.svc.cluster.local:7000"
	db, primary, replica := startNameServer(t, "db", nil), startNameServer(t, "db-primary", nil), startNameServer(t, "db-replica", nil)
	resolver := dataplane.NewMemoryResolver()
	resolver.Set(authority, db.endpoint())
	resolver.Set("db-primary.data.svc.cluster.local:7000", primary.endpoint())
	resolver.Set("db-replica.data.svc.cluster.local:7000", replica.endpoint())

	svc := func(name string) runtime.Object {
		s := streamSvc(name, 7000)
		s.Namespace = "data"
		return s
	}
	producer := tcpRoute("to-primary", parentRef("Service", "db", 7000), svcBackend("db-primary", 7000, 1))
	producer.Namespace = "data"
	producer.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	data := gatewayv1.Namespace("data")
	parent := parentRef("Service", "db", 7000)
	parent.Namespace = &data
	toReplica := svcBackend("db-replica", 7000, 1)
	toReplica.Namespace = &data
	consumer := tcpRoute("to-replica", parent, toReplica)
	consumer.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	objs := []runtime.Object{svc("db"), svc("db-primary"), svc("db-replica"), producer}

	src, x := outboundIndexer(t, append(objs, consumer))
	shop := startStreamProxyIn(t, x, "shop", resolver, authority)
	ops := startStreamProxyIn(t, x, "ops", resolver, authority)

	for range 3 {
		assert.Equal(t, "db-replica", shop.tcpName(t, authority), "shop's consumer route")
		assert.Equal(t, "db-primary", ops.tcpName(t, authority), "another namespace: the producer route")
	}

	// Without the consumer route, shop's clients are like everyone else.
	src.Set(policyObjects(t, objs))
	testutil.Eventually(t, 10*time.Second, func() bool { return shop.tcpName(t, authority) == "db-primary" }, "shop follows the producer route")
	assert.Equal(t, "db-primary", ops.tcpName(t, authority))
	assert.Zero(t, db.accepted.Load(), "the routes send every connection on; db's own endpoint saw none")
}
