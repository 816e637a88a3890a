package discovery_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"k8s.io/apimachinery/pkg/runtime"
)

// indexHarness feeds the index directly, the in-memory way to use it.
type indexHarness struct{ idx *discovery.Index }

func (h indexHarness) Index() *discovery.Index { return h.idx }

func (h indexHarness) Apply(t testing.TB, objs ...runtime.Object) {
	require.NoError(t, h.idx.Upsert(objs...))
}

func (h indexHarness) Delete(t testing.TB, objs ...runtime.Object) {
	require.NoError(t, h.idx.Delete(objs...))
}

func TestIndexFedDirectlyPassesTheSourceSuite(t *testing.T) {
	discoverytest.RunSuite(t, func(t *testing.T, opts ...discovery.Option) discoverytest.Harness {
		idx, err := discovery.NewIndex(opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = idx.Close() })
		return indexHarness{idx: idx}
	})
}
