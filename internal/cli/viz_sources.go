package cli

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/weftmesh/weft/mesh/viz"
	vizk8s "github.com/weftmesh/weft/mesh/viz/kubernetes"
	vizprom "github.com/weftmesh/weft/mesh/viz/prometheus"
)

func nan() float64 { return math.NaN() }

// localManifests is the manifests directory of the local mesh in dir.
func localManifests(dir string) string { return filepath.Join(dir, "manifests") }

// kubeVizSource reads the cluster of the kubeconfig: pods listed and
// proxies read through the API server, taps through the cluster's tap
// API (weft-controller tap, behind the API server).
func kubeVizSource(f *vizFlags) (viz.Source, error) {
	restCfg, err := kubeRESTConfig(f.kubeconfig, f.kubeCtx, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("no cluster to read (use --local DIR for a local mesh, or --kubeconfig): %w", err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	// A tap streams until it is stopped: its client has no overall
	// timeout (the API server and the tap component bound it).
	streamCfg := rest.CopyConfig(restCfg)
	streamCfg.Timeout = 0
	streamCS, err := kubernetes.NewForConfig(streamCfg)
	if err != nil {
		return nil, err
	}
	return vizk8s.New(cs, vizk8s.WithNamespace(f.ns()), vizk8s.WithTapREST(streamCS.Discovery().RESTClient())), nil
}

// prometheusWindow asks the Prometheus server of --prometheus for the
// window.
func prometheusWindow(ctx context.Context, f *vizFlags, wf *windowFlags) (viz.Window, error) {
	c, err := vizprom.New(f.prometheus, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		return viz.Window{}, err
	}
	d := wf.window
	if wf.sinceStart {
		d = 0
	}
	return c.Window(ctx, d)
}
