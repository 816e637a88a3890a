package policy_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/ports"
)

// The destination controller (GetProfile's opaque_protocol) and the policy
// controller (the Outbound API's protocol) read the same objects and the
// same default list, so they must agree about every Service port.
func TestDestinationAndPolicyControllersAgreeAboutOpaqueServicePorts(t *testing.T) {
	svcPorts := []uint16{80, 25, 3306, 5432, 8080, 9000}
	cases := []struct {
		name       string
		nsAnn      map[string]string
		svcAnn     map[string]string
		defaults   string
		wantOpaque []uint16
	}{
		{name: "no annotation: the whole default list", wantOpaque: []uint16{25, 3306, 5432}},
		{name: "the Service's annotation", svcAnn: map[string]string{vocab.AnnotationOpaquePorts: "8080"}, wantOpaque: []uint16{8080}},
		{name: "the namespace's annotation", nsAnn: map[string]string{vocab.AnnotationOpaquePorts: "9000"}, wantOpaque: []uint16{9000}},
		{name: "an empty annotation: none", svcAnn: map[string]string{vocab.AnnotationOpaquePorts: ""}},
		{name: "a bad annotation: none", svcAnn: map[string]string{vocab.AnnotationOpaquePorts: "25,x"}},
		{name: "the flag's list", defaults: "8080-9000", wantOpaque: []uint16{8080, 9000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defaults := ports.DefaultOpaque()
			if tc.defaults != "" {
				var err error
				defaults, err = ports.Parse(tc.defaults, nil)
				require.NoError(t, err)
			}
			ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: tc.nsAnn}}
			svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", Annotations: tc.svcAnn},
				Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.5", Selector: map[string]string{"app": "db"}}}
			for _, p := range svcPorts {
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Port: int32(p)})
			}

			objs := &policy.Objects{}
			require.NoError(t, objs.Add(ns, policy.Location{}))
			require.NoError(t, objs.Add(svc, policy.Location{}))
			cfg, err := policy.NewConfig(policy.WithDefaultOpaquePorts(defaults))
			require.NoError(t, err)
			ix := policy.Build(objs, cfg)

			want := ports.Of(tc.wantOpaque...)
			for _, p := range svcPorts {
				authority := fmt.Sprintf("db.shop.svc.cluster.local:%d", p)
				prof, err := discovery.ResolveProfile([]runtime.Object{ns, svc}, authority, discovery.ContextToken{}, discovery.WithDefaultOpaquePorts(defaults))
				require.NoError(t, err)
				target, err := ix.ResolveAuthority(authority)
				require.NoError(t, err)
				pol, err := ix.OutboundPolicy(target)
				require.NoError(t, err)
				policyOpaque := pol.GetProtocol().GetOpaque() != nil

				assert.Equal(t, want.Contains(uint32(p)), prof.OpaqueProtocol, "GetProfile, port %d", p)
				assert.Equal(t, prof.OpaqueProtocol, policyOpaque, "the two controllers disagree about port %d", p)
			}
		})
	}
}
