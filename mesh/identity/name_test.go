package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/identity"
)

func TestNameRoundTripsThroughItsTextForm(t *testing.T) {
	n, err := identity.DefaultDomain().Name("shop", "web")
	require.NoError(t, err)
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", n.String())
	assert.Equal(t, "spiffe://cluster.local/ns/shop/sa/web", n.SPIFFEID())

	parsed, err := identity.ParseName(n.String())
	require.NoError(t, err)
	assert.Equal(t, n, parsed)
}

func TestParseNameKeepsDotsInServiceAccountsAndTrustDomains(t *testing.T) {
	n, err := identity.ParseName("my.sa.prod.serviceaccount.identity.linkerd.corp.example.com")
	require.NoError(t, err)
	assert.Equal(t, "my.sa", n.ServiceAccount)
	assert.Equal(t, "prod", n.Namespace)
	assert.Equal(t, "linkerd", n.Domain.ControlPlaneNamespace)
	assert.Equal(t, "corp.example.com", n.Domain.TrustDomain)
}

func TestDomainDefaultsFillEmptyFields(t *testing.T) {
	n, err := identity.Domain{}.Name("ns", "sa")
	require.NoError(t, err)
	assert.Equal(t, identity.DefaultDomain(), n.Domain)

	n, err = identity.Domain{ControlPlaneNamespace: "linkerd", TrustDomain: "example.org"}.Name("ns", "sa")
	require.NoError(t, err)
	assert.Equal(t, "sa.ns.serviceaccount.identity.linkerd.example.org", n.String())
}

func TestParseNameRejectsMalformedNames(t *testing.T) {
	cases := map[string]string{
		"empty":                  "",
		"no infix":               "web.shop.identity.weft.cluster.local",
		"no namespace":           "web.serviceaccount.identity.weft.cluster.local",
		"no trust domain":        "web.shop.serviceaccount.identity.weft",
		"upper case":             "Web.shop.serviceaccount.identity.weft.cluster.local",
		"underscore":             "web_1.shop.serviceaccount.identity.weft.cluster.local",
		"empty label":            "web..shop.serviceaccount.identity.weft.cluster.local",
		"leading dash":           "-web.shop.serviceaccount.identity.weft.cluster.local",
		"trailing dot":           "web.shop.serviceaccount.identity.weft.cluster.local.",
		"nul byte":               "web\x00.shop.serviceaccount.identity.weft.cluster.local",
		"long namespace":         "web." + strings.Repeat("a", 64) + ".serviceaccount.identity.weft.cluster.local",
		"too long overall":       strings.Repeat("a.", 130) + "shop.serviceaccount.identity.weft.cluster.local",
		"wildcard":               "*.shop.serviceaccount.identity.weft.cluster.local",
		"spiffe form is not DNS": "spiffe://cluster.local/ns/shop/sa/web",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := identity.ParseName(in)
			require.Error(t, err)
			assert.True(t, errors.Is(err, identity.ErrInvalidName), "error %v should wrap ErrInvalidName", err)
			assert.True(t, strings.HasPrefix(err.Error(), "identity: "), err.Error())
		})
	}
}

func TestParseSPIFFEChecksTrustDomainAndPath(t *testing.T) {
	d := identity.DefaultDomain()
	n, err := d.ParseSPIFFE("spiffe://cluster.local/ns/shop/sa/web")
	require.NoError(t, err)
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", n.String())

	for _, bad := range []string{
		"https://cluster.local/ns/shop/sa/web",
		"spiffe://other.local/ns/shop/sa/web",
		"spiffe://cluster.local/ns/shop/sa/web/extra",
		"spiffe://cluster.local/sa/web/ns/shop",
		"spiffe://cluster.local/ns/Shop/sa/web",
		"spiffe://cluster.local",
	} {
		_, err := d.ParseSPIFFE(bad)
		assert.ErrorIs(t, err, identity.ErrInvalidName, bad)
	}
}

func TestDomainValidateNamesTheBadField(t *testing.T) {
	err := identity.Domain{ControlPlaneNamespace: "Weft", TrustDomain: "cluster.local"}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "control-plane namespace")

	err = identity.Domain{ControlPlaneNamespace: "weft", TrustDomain: "cluster..local"}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "trust domain")
}

func FuzzParseName(f *testing.F) {
	f.Add("web.shop.serviceaccount.identity.weft.cluster.local")
	f.Add("a.b.serviceaccount.identity.c.d")
	f.Add("x.serviceaccount.identity.")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := identity.ParseName(s)
		if err != nil {
			return
		}
		// Whatever parses formats back to the same text and validates.
		if n.String() != s {
			t.Fatalf("ParseName(%q).String() = %q", s, n.String())
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("ParseName(%q) returned an invalid name: %v", s, err)
		}
	})
}
