package cli

import (
	"context"
	"errors"
	"math"
	"path/filepath"

	"github.com/weftmesh/weft/mesh/viz"
)

func nan() float64 { return math.NaN() }

// localManifests is the manifests directory of the local mesh in dir.
func localManifests(dir string) string { return filepath.Join(dir, "manifests") }

func kubeVizSource(f *vizFlags) (viz.Source, error) {
	return nil, errors.New("cluster source: not built yet")
}

func prometheusWindow(ctx context.Context, f *vizFlags, wf *windowFlags) (viz.Window, error) {
	return viz.Window{}, errors.New("prometheus: not built yet")
}
