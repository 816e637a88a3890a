package ports_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/ports"
)

func TestParseReadsNumbersRangesAndNamesAndMergesThem(t *testing.T) {
	s, err := ports.Parse(" 25, 4000-4100,mysql,4050-4200 ,,", map[string]int32{"mysql": 3306})
	require.NoError(t, err)
	assert.Equal(t, "25,3306,4000-4200", s.String())
	assert.True(t, s.Contains(4150))
	assert.False(t, s.Contains(0))
	assert.False(t, s.Contains(70000))
	for _, bad := range []string{"0", "65536", "10-5", "x", "1-", "-1", "123456"} {
		_, err := ports.Parse(bad, nil)
		assert.Error(t, err, bad)
		assert.ErrorContains(t, err, "ports:", bad)
	}
}

func TestDefaultOpaqueIsLinkerdsList(t *testing.T) {
	assert.Equal(t, vocab.DefaultOpaquePorts, ports.DefaultOpaque().String())
}

func TestAPodGetsOnlyTheDefaultOpaquePortsItDeclares(t *testing.T) {
	s, src, err := ports.OpaqueForPod(nil, nil, nil, []uint16{8080, 5432}, ports.DefaultOpaque())
	require.NoError(t, err)
	assert.Equal(t, ports.FromDefault, src)
	assert.Equal(t, "5432", s.String(), "3306 is not declared, so it is not opaque")

	s, _, _ = ports.OpaqueForPod(nil, nil, nil, nil, ports.DefaultOpaque())
	assert.True(t, s.Empty())
}

func TestAnAnnotationWinsOverTheNamespaceWhichWinsOverTheDefaults(t *testing.T) {
	ann := func(v string) map[string]string { return map[string]string{vocab.AnnotationOpaquePorts: v} }
	s, src, err := ports.OpaqueForPod(ann("http"), ann("9000"), map[string]int32{"http": 8080}, []uint16{5432}, ports.DefaultOpaque())
	require.NoError(t, err)
	assert.Equal(t, ports.FromObject, src)
	assert.Equal(t, "8080", s.String())

	s, src, err = ports.OpaqueForPod(nil, ann("9000"), nil, []uint16{5432}, ports.DefaultOpaque())
	require.NoError(t, err)
	assert.Equal(t, ports.FromNamespace, src)
	assert.Equal(t, "9000", s.String())

	s, src, err = ports.OpaqueForService(nil, nil, ports.DefaultOpaque())
	require.NoError(t, err)
	assert.Equal(t, ports.FromDefault, src)
	assert.True(t, s.Contains(3306), "a Service without annotations gets the whole default list")

	s, src, err = ports.OpaqueForService(ann(""), ann("9000"), ports.DefaultOpaque())
	require.NoError(t, err)
	assert.Equal(t, ports.FromObject, src)
	assert.True(t, s.Empty(), "an empty annotation means no opaque port")
}

func TestABadAnnotationIsAnErrorAndCountsAsEmpty(t *testing.T) {
	s, src, err := ports.OpaqueForService(map[string]string{vocab.AnnotationOpaquePorts: "3306,nope"}, nil, ports.DefaultOpaque())
	assert.ErrorContains(t, err, `"nope"`)
	assert.Equal(t, ports.FromObject, src)
	assert.True(t, s.Empty())
}
