package tapapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

func TestPathsRoundTripEveryResourceATapMayName(t *testing.T) {
	for _, r := range []viz.Resource{
		{Kind: viz.KindNamespace, Namespace: "shop"},
		{Kind: viz.KindPod, Namespace: "shop", Name: "web-1"},
		{Kind: viz.KindPod, Namespace: "shop"},
		{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: "shop", Name: "web"},
		{Kind: viz.KindWorkload, WorkloadKind: "statefulset", Namespace: "shop", Name: "db"},
		{Kind: viz.KindWorkload, WorkloadKind: "daemonset", Namespace: "shop"},
		{Kind: viz.KindWorkload, WorkloadKind: "k8s_job", Namespace: "shop", Name: "migrate"},
	} {
		tg, err := tapapi.TargetOf(r)
		require.NoError(t, err, "%s", r)
		back, ok, err := tapapi.ParsePath(tg.Path())
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, tg, back)
		assert.Equal(t, r, back.Select(), "%s selects what was asked", tg.Path())
	}
	_, err := tapapi.TargetOf(viz.Resource{Kind: viz.KindWorkload, Namespace: "shop"})
	assert.ErrorContains(t, err, "cannot tap workload")
	_, err = tapapi.TargetOf(viz.Resource{Kind: viz.KindAuthority, Namespace: "shop"})
	assert.ErrorContains(t, err, "cannot tap authority")
}

func TestParsePathRefusesWhatIsNoTap(t *testing.T) {
	const p = "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/"
	for path, msg := range map[string]string{
		p + "shop/namespaces/tap":     `cannot tap "namespaces"`,
		p + "shop/secrets/db/tap":     `cannot tap "secrets"`,
		p + "shop/pods/web/extra/tap": "want .../namespaces/NS[/RESOURCE[/NAME]]/tap",
		p + "shop/pods/../tap":        `name ".."`,
		p + "shop//tap":               `name ""`,
		p + "SHOP/tap":                `name "SHOP"`,
		p + "shop/pods/web%2F1/tap":   `name "web%2F1"`,
	} {
		_, ok, err := tapapi.ParsePath(path)
		assert.True(t, ok, path)
		assert.ErrorContains(t, err, msg, path)
	}
	for _, path := range []string{"/apis", "/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop", "/api/v1/namespaces/shop/pods/web/tap"} {
		_, ok, err := tapapi.ParsePath(path)
		assert.False(t, ok, path)
		assert.NoError(t, err)
	}
}

func FuzzParsePath(f *testing.F) {
	f.Add("/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/deployments/web/tap")
	f.Add("/apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/tap")
	f.Add("/apis/tap.weftmesh.io/v1alpha1/watch/namespaces//pods//tap")
	f.Fuzz(func(t *testing.T, p string) {
		tg, ok, err := tapapi.ParsePath(p)
		if !ok || err != nil {
			return
		}
		// What parses names a known resource and prints back the same.
		assert.Equal(t, p, tg.Path())
		tg.Select()
	})
}
