package outbound

import (
	"context"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// direction is the direction label of the outbound series and counters.
const direction = "outbound"

// MaxDialAttempts bounds how many endpoints one request tries when it
// cannot connect; the dataplane package's L4 outbound path bounds a
// connection's tries by it too.
const MaxDialAttempts = 3

// Service is one destination's HTTP state as its requests read it. The
// dataplane package keeps it on discovery's destination, where the L4
// outbound path reads its policy too, and keeps it up to date with the
// destination's outbound policy and profile; a request reads each part
// once or once per attempt.
type Service interface {
	// Names are what the request's logs, counters and peer proxy call
	// the destination.
	Names() Names
	// Router selects the request's route, from the latest policy and
	// profile the proxy could read.
	Router() *route.Router
	// Budget is the destination's retry budget.
	Budget() *retry.Budget
	// RouteSeries is the route-level series of the named route.
	RouteSeries(route string) *reqmetrics.Series
	// LocalSeries is the endpoint-level series of the requests the proxy
	// answers before reaching any endpoint.
	LocalSeries() *reqmetrics.Series
	// Backend is the backend spec names under the route's failure
	// accrual, resolved the first time it is asked for; an error means
	// its discovery could not be started.
	Backend(ctx context.Context, spec route.Backend, acc *balance.Accrual) (Backend, error)
}

// Names are what a Service is called.
type Names struct {
	Target string // the authority the application asked for
	Label  string // Target as the counters' label (budgeted)
	// Canonical is the Service's FQDN:PORT from discovery, "" when the
	// target is not known as a Service; a peer proxy is told it in
	// l5d-dst-canonical.
	Canonical string
}

// Backend is one backend of a route, with its request balancer.
type Backend interface {
	// Balancer is the backend's balancer, up to date with discovery's
	// endpoints. It is a concrete type, so that a request's list of
	// endpoints already tried stays on its stack.
	Balancer() *balance.Balancer[endpoint.Endpoint]
	// Series is the endpoint-level series of the endpoint behind h.
	Series(h *balance.Handle[endpoint.Endpoint]) *reqmetrics.Series
}
