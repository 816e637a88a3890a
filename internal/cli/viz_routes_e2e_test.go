package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// backendProfile is a ServiceProfile for the demo's backend with one
// route, the one frontend calls.
const backendProfile = `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata:
  name: backend.demo.svc.cluster.local
  namespace: demo
spec:
  routes:
  - name: GET /items
    condition:
      method: GET
      pathRegex: /items
`

type routesJSON struct {
	Routes []struct {
		Direction   string   `json:"direction"`
		Authority   string   `json:"authority"`
		Route       string   `json:"route"`
		Requests    float64  `json:"requests"`
		Successes   float64  `json:"successes"`
		SuccessRate *float64 `json:"successRate"`
		MTLSShare   *float64 `json:"mtlsShare"`
	} `json:"routes"`
}

// route returns the requests of the named route to authority, -1 when
// the row is missing.
func (r routesJSON) requests(authority, route string) float64 {
	for _, row := range r.Routes {
		if row.Authority == authority && row.Route == route {
			return row.Requests
		}
	}
	return -1
}

func TestVizRoutesByServiceShowProfileRoutesOnBothSidesOverMutualTLS(t *testing.T) {
	p := startPacedDemo(t)
	dir := p.live.State.Dir
	local := []string{"-n", "demo", "--local", dir, "-o", "json", "--since-start"}
	const backendFQN = "backend.demo.svc.cluster.local:8081"
	// The destination service reads the mesh's manifests and follows
	// them: the profile reaches both proxies' watches.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests", "backend-profile.yaml"), []byte(backendProfile), 0o600))

	// Requests go one at a time until both sides count one on the
	// profile's route (the first ones may have been counted before the
	// profile arrived, on [DEFAULT]).
	var sent int64
	testutil.Eventually(t, 60*time.Second, func() bool {
		sent++
		p.traffic.Allow(1)
		p.waitCounts(t, sent, 0)
		var out, in routesJSON
		vizJSON(t, &out, append([]string{"routes", "deploy/frontend", "--to", "svc/backend"}, local...)...)
		vizJSON(t, &in, append([]string{"routes", "deploy/backend"}, local...)...)
		return out.requests(backendFQN, "GET /items") > 0 && in.requests(backendFQN, "GET /items") > 0
	}, "the profile's route on both sides")

	// From here every call of frontend's is on the route: k more show
	// there, exactly, on both sides.
	var out0, in0 routesJSON
	testutil.Eventually(t, 30*time.Second, func() bool {
		vizJSON(t, &out0, append([]string{"routes", "deploy/frontend", "--to", "svc/backend"}, local...)...)
		vizJSON(t, &in0, append([]string{"routes", "deploy/backend"}, local...)...)
		total := func(r routesJSON) float64 {
			n := 0.0
			for _, row := range r.Routes {
				n += row.Requests
			}
			return n
		}
		return total(out0) >= float64(sent) && total(in0) >= float64(sent)
	}, "the proxies to count every call so far")
	const k = 10
	p.traffic.Allow(k)
	p.waitCounts(t, sent+k, 0)
	wantOut := out0.requests(backendFQN, "GET /items") + k
	wantIn := in0.requests(backendFQN, "GET /items") + k
	for _, to := range []string{"svc/backend", "service/backend", "backend", "backend.demo.svc.cluster.local", "backend:8081"} {
		var out routesJSON
		testutil.Eventually(t, 30*time.Second, func() bool {
			vizJSON(t, &out, append([]string{"routes", "deploy/frontend", "--to", to}, local...)...)
			return out.requests(backendFQN, "GET /items") == wantOut
		}, "frontend's calls on the route, --to "+to)
		for _, row := range out.Routes {
			assert.Equal(t, "outbound", row.Direction)
			assert.Equal(t, backendFQN, row.Authority, "the Service's name")
			if row.Route == "GET /items" {
				require.NotNil(t, row.SuccessRate)
				assert.Equal(t, 1.0, *row.SuccessRate, to)
				require.NotNil(t, row.MTLSShare)
				assert.Equal(t, 1.0, *row.MTLSShare, "every call went over mutual TLS (--to %s)", to)
			}
		}
	}
	var in routesJSON
	testutil.Eventually(t, 30*time.Second, func() bool {
		vizJSON(t, &in, append([]string{"routes", "deploy/backend"}, local...)...)
		return in.requests(backendFQN, "GET /items") == wantIn
	}, "backend's served calls on the route")
	for _, row := range in.Routes {
		assert.Equal(t, "inbound", row.Direction)
		if row.Route == "GET /items" {
			require.NotNil(t, row.MTLSShare)
			assert.Equal(t, 1.0, *row.MTLSShare, "every served call came over mutual TLS")
		} else {
			assert.Equal(t, "[DEFAULT]", row.Route, "anything else is the default route, as Linkerd shows it")
		}
	}

	// Another Service, or an address that is none, has no routes; a target
	// that is not a Service or an address is a usage error naming it.
	var none routesJSON
	vizJSON(t, &none, append([]string{"routes", "deploy/frontend", "--to", "svc/frontend"}, local...)...)
	assert.Empty(t, none.Routes)
	vizJSON(t, &none, append([]string{"routes", "deploy/frontend", "--to", "192.0.2.1:8081"}, local...)...)
	assert.Empty(t, none.Routes)
	var stdout, stderr testutil.SyncBuffer
	code := VizCommand().Run(testutil.Context(t, time.Minute), append([]string{"routes", "deploy/frontend", "--to", "deploy/backend"}, local...), IO{Stdout: &stdout, Stderr: &stderr})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr.String(), `"deploy/backend" is not a Service`)
	assert.Empty(t, stdout.String())
}
