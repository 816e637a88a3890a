package control_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/control"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnvWithNothingSetLeavesEverySettingEmpty(t *testing.T) {
	cfg, err := control.FromEnv(lookupIn(nil))
	require.NoError(t, err)
	assert.Equal(t, control.Config{}, cfg)
}

func TestFromEnvReadsTheControlPlaneAndWorkloadSettings(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.cluster.local"})
	const name = "web.shop.serviceaccount.identity.weft.cluster.local"
	cfg, err := control.FromEnv(lookupIn(map[string]string{
		"WEFT_PROXY_IDENTITY_ADDR":       " weft-identity.weft.svc.cluster.local:8080 ",
		"WEFT_PROXY_DESTINATION_ADDR":    "weft-dst.weft.svc.cluster.local.:8086",
		"WEFT_PROXY_POLICY_ADDR":         "127.0.0.1:8090",
		"WEFT_PROXY_TRUST_ANCHORS":       string(anchor.CertPEM),
		"WEFT_PROXY_IDENTITY_TOKEN_FILE": "/var/run/secrets/tokens/weft-identity-token",
		"WEFT_PROXY_IDENTITY_NAME":       name,
		"WEFT_PROXY_DESTINATION_CONTEXT": `{"ns":"shop","nodeName":"n1"}`,
		"WEFT_PROXY_NAMESPACE":           "shop",
		"WEFT_PROXY_POD":                 "web-1",
		"WEFT_PROXY_SERVICE_ACCOUNT":     "web",
	}))
	require.NoError(t, err)
	assert.Equal(t, control.Config{
		IdentityAddr:       "weft-identity.weft.svc.cluster.local:8080",
		DestinationAddr:    "weft-dst.weft.svc.cluster.local.:8086",
		PolicyAddr:         "127.0.0.1:8090",
		TrustAnchorsPEM:    anchor.CertPEM,
		IdentityTokenFile:  "/var/run/secrets/tokens/weft-identity-token",
		IdentityName:       name,
		DestinationContext: `{"ns":"shop","nodeName":"n1"}`,
		Namespace:          "shop",
		Pod:                "web-1",
		ServiceAccount:     "web",
	}, cfg)
}

func TestFromEnvNamesEachBadControlSettingAndReportsThemAtOnce(t *testing.T) {
	cases := map[string]string{
		"WEFT_PROXY_IDENTITY_ADDR":    "identity:http",
		"WEFT_PROXY_DESTINATION_ADDR": "bad host:8086",
		"WEFT_PROXY_POLICY_ADDR":      "127.0.0.1:0",
		"WEFT_PROXY_TRUST_ANCHORS":    "not a pem",
		"WEFT_PROXY_IDENTITY_NAME":    "web..shop",
	}
	for name, val := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := control.FromEnv(lookupIn(map[string]string{name: val, "WEFT_PROXY_POD": "web-1"}))
			require.Error(t, err)
			assert.Equal(t, control.Config{}, cfg, "nothing of a refused environment is kept")
			assert.True(t, strings.HasPrefix(err.Error(), "control: "+name+"="), err.Error())
		})
	}
	_, err := control.FromEnv(lookupIn(cases))
	require.Error(t, err)
	for name := range cases {
		assert.Contains(t, err.Error(), name)
	}
}

func TestSettingsDocumentEveryVariableControlFromEnvReads(t *testing.T) {
	var names []string
	for _, s := range control.Settings() {
		require.True(t, strings.HasPrefix(s.Env, "WEFT_PROXY_"))
		require.NotEmpty(t, s.Help)
		names = append(names, s.Env)
	}
	seen := map[string]bool{}
	_, _ = control.FromEnv(func(k string) (string, bool) { seen[k] = true; return "", false })
	assert.Len(t, seen, len(names))
	for _, n := range names {
		assert.True(t, seen[n], "%s is documented but never read", n)
	}
}
