package install_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// fixture is a set of run-time certificates for an install in namespace ns.
type fixture struct {
	anchor *testutil.CA
	issuer *testutil.CA
	hookCA *testutil.CA
	certs  install.Certificates
}

func newFixture(t testing.TB, ns string) fixture {
	t.Helper()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.test", Lifetime: 365 * 24 * time.Hour})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.weft.test", Lifetime: 180 * 24 * time.Hour})
	hookCA := testutil.NewAnchor(t, testutil.CertOptions{Name: "webhook CA", Lifetime: 365 * 24 * time.Hour})
	leaf := hookCA.Leaf(t, testutil.CertOptions{Name: install.InjectorServerName(ns), Lifetime: 365 * 24 * time.Hour})
	tapCA := testutil.NewAnchor(t, testutil.CertOptions{Name: "tap CA", Lifetime: 365 * 24 * time.Hour})
	tapLeaf := tapCA.Leaf(t, testutil.CertOptions{Name: install.TapServerName(ns), Lifetime: 365 * 24 * time.Hour})
	return fixture{
		anchor: anchor, issuer: issuer, hookCA: hookCA,
		certs: install.Certificates{
			Identity: install.Identity{TrustAnchorsPEM: anchor.CertPEM, IssuerCertPEM: issuer.CertPEM, IssuerKeyPEM: issuer.KeyPEM},
			Webhook:  install.Webhook{CAPEM: hookCA.CertPEM, CertPEM: leaf.CertPEM, KeyPEM: leaf.KeyPEM},
			Tap:      install.Webhook{CAPEM: tapCA.CertPEM, CertPEM: tapLeaf.CertPEM, KeyPEM: tapLeaf.KeyPEM},
		},
	}
}

func render(t testing.TB, values inject.Values, certs install.Certificates, opts ...install.Option) *install.Manifest {
	t.Helper()
	m, err := install.Render(values, certs, opts...)
	require.NoError(t, err)
	return m
}

// index finds rendered objects by kind and name.
type index map[string]install.Object

func indexOf(objs []install.Object) index {
	x := index{}
	for _, o := range objs {
		x[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName()] = o
	}
	return x
}

func get[T install.Object](t testing.TB, x index, kind, name string) T {
	t.Helper()
	o, ok := x[kind+"/"+name]
	require.True(t, ok, "no %s %s rendered", kind, name)
	v, ok := o.(T)
	require.True(t, ok, "%s %s is a %T", kind, name, o)
	return v
}

func kinds(objs []install.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind)
	}
	return out
}

func gvk(o install.Object) schema.GroupVersionKind { return o.GetObjectKind().GroupVersionKind() }
