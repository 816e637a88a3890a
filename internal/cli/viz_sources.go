package cli

import (
	"context"
	"errors"
	"math"
	"net/http"
	"path/filepath"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
	vizprom "github.com/weftmesh/weft/mesh/viz/prometheus"
)

func nan() float64 { return math.NaN() }

// localManifests is the manifests directory of the local mesh in dir.
func localManifests(dir string) string { return filepath.Join(dir, "manifests") }

func kubeVizSource(f *vizFlags) (viz.Source, error) {
	return nil, errors.New("cluster source: not built yet")
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
