package crds_test

import (
	"context"
	"io/fs"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weftmesh/weft/apis/crds"
	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta1 "github.com/weftmesh/weft/apis/policy/v1beta1"
	policyv1beta2 "github.com/weftmesh/weft/apis/policy/v1beta2"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
)

// wantCRDs is the compatibility contract: every CRD, its served versions in
// order, the storage version and the short names Linkerd gives it.
var wantCRDs = map[string]struct {
	kind       string
	versions   []string
	storage    string
	shortNames []string
}{
	"servers.policy.linkerd.io":                    {"Server", []string{"v1beta1", "v1beta2", "v1beta3"}, "v1beta3", []string{"srv"}},
	"serverauthorizations.policy.linkerd.io":       {"ServerAuthorization", []string{"v1beta1"}, "v1beta1", []string{"saz"}},
	"authorizationpolicies.policy.linkerd.io":      {"AuthorizationPolicy", []string{"v1alpha1"}, "v1alpha1", []string{"authzpolicy"}},
	"meshtlsauthentications.policy.linkerd.io":     {"MeshTLSAuthentication", []string{"v1alpha1"}, "v1alpha1", []string{"meshtlsauthn"}},
	"networkauthentications.policy.linkerd.io":     {"NetworkAuthentication", []string{"v1alpha1"}, "v1alpha1", []string{"netauthn", "networkauthn"}},
	"httplocalratelimitpolicies.policy.linkerd.io": {"HTTPLocalRateLimitPolicy", []string{"v1alpha1"}, "v1alpha1", nil},
	"egressnetworks.policy.linkerd.io":             {"EgressNetwork", []string{"v1alpha1"}, "v1alpha1", nil},
	"httproutes.policy.linkerd.io":                 {"HTTPRoute", []string{"v1beta3"}, "v1beta3", nil},
	"serviceprofiles.linkerd.io":                   {"ServiceProfile", []string{"v1alpha2"}, "v1alpha2", []string{"sp"}},
}

func TestAllReturnsEveryLinkerdCRDWithItsVersionsAndShortNames(t *testing.T) {
	all, err := crds.All()
	require.NoError(t, err)

	var got []string
	for _, crd := range all {
		got = append(got, crd.Name)
	}
	var want []string
	for name := range wantCRDs {
		want = append(want, name)
	}
	sort.Strings(want)
	require.Equal(t, want, got, "All returns the CRDs sorted by name")

	for _, crd := range all {
		w := wantCRDs[crd.Name]
		assert.Equal(t, w.kind, crd.Spec.Names.Kind, crd.Name)
		assert.Equal(t, apiextensionsv1.NamespaceScoped, crd.Spec.Scope, crd.Name)
		assert.Equal(t, w.shortNames, crd.Spec.Names.ShortNames, crd.Name)
		var versions []string
		for _, v := range crd.Spec.Versions {
			versions = append(versions, v.Name)
			assert.True(t, v.Served, "%s %s is served", crd.Name, v.Name)
			require.NotNil(t, v.Schema, "%s %s has a schema", crd.Name, v.Name)
			require.NotNil(t, v.Schema.OpenAPIV3Schema, "%s %s has a schema", crd.Name, v.Name)
		}
		assert.Equal(t, w.versions, versions, crd.Name)
	}
}

func TestEachCRDHasExactlyOneStorageVersion(t *testing.T) {
	all, err := crds.All()
	require.NoError(t, err)
	for _, crd := range all {
		var storage []string
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				storage = append(storage, v.Name)
			}
		}
		if assert.Len(t, storage, 1, "%s storage versions", crd.Name) {
			assert.Equal(t, wantCRDs[crd.Name].storage, storage[0], crd.Name)
		}
	}
}

func TestServerIsStoredAtV1beta3AndOlderVersionsAreDeprecatedAsInLinkerd(t *testing.T) {
	crd, err := crds.Get("servers.policy.linkerd.io")
	require.NoError(t, err)
	byName := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range crd.Spec.Versions {
		byName[v.Name] = v
	}
	assert.True(t, byName["v1beta3"].Storage)
	assert.False(t, byName["v1beta2"].Storage)
	assert.False(t, byName["v1beta1"].Storage)
	assert.True(t, byName["v1beta1"].Deprecated)
	require.NotNil(t, byName["v1beta1"].DeprecationWarning)
	assert.Contains(t, *byName["v1beta1"].DeprecationWarning, "use policy.linkerd.io/v1beta3 Server")

	var columns []string
	for _, c := range byName["v1beta3"].AdditionalPrinterColumns {
		columns = append(columns, c.Name+"="+c.JSONPath)
	}
	assert.Equal(t, []string{"Port=.spec.port", "Protocol=.spec.proxyProtocol", "Access Policy=.spec.accessPolicy"}, columns)

	spec := byName["v1beta3"].Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, []string{"port"}, spec.Required)
	port := spec.Properties["port"]
	assert.True(t, port.XIntOrString, "port is a number or a name")
	access := spec.Properties["accessPolicy"]
	require.NotNil(t, access.Default)
	assert.JSONEq(t, `"deny"`, string(access.Default.Raw))
	proto := spec.Properties["proxyProtocol"]
	require.NotNil(t, proto.Default)
	assert.JSONEq(t, `"unknown"`, string(proto.Default.Raw))
}

func TestHTTPLocalRateLimitPolicyHasLinkerdsColumnsAndStatusAndLeavesTheNumbersToTheWebhook(t *testing.T) {
	crd, err := crds.Get("httplocalratelimitpolicies.policy.linkerd.io")
	require.NoError(t, err)
	require.Len(t, crd.Spec.Versions, 1)
	v := crd.Spec.Versions[0]
	var columns []string
	for _, c := range v.AdditionalPrinterColumns {
		columns = append(columns, c.Name+"="+c.JSONPath)
	}
	assert.Equal(t, []string{"Target_kind=.spec.targetRef.kind", "Target_name=.spec.targetRef.name",
		"Total_RPS=.spec.total.requestsPerSecond", "Identity_RPS=.spec.identity.requestsPerSecond"}, columns)
	require.NotNil(t, v.Subresources)
	assert.NotNil(t, v.Subresources.Status, "Linkerd's controller writes status through the subresource")

	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, []string{"targetRef"}, spec.Required)
	total := spec.Properties["total"].Properties["requestsPerSecond"]
	assert.Equal(t, "integer", total.Type)
	assert.Equal(t, "int64", total.Format, "as in Linkerd's schema")
	assert.Nil(t, total.Minimum, "bounds are checked by the policy translation, the one rule set")
	override := spec.Properties["overrides"].Items.Schema
	assert.ElementsMatch(t, []string{"requestsPerSecond", "clientRefs"}, override.Required)
}

func TestEgressNetworkHasLinkerdsSchemaAndStatusAndLeavesEmptyNetworksToTheWebhook(t *testing.T) {
	crd, err := crds.Get("egressnetworks.policy.linkerd.io")
	require.NoError(t, err)
	assert.Equal(t, []string{"policy"}, crd.Spec.Names.Categories, "kubectl get policy lists it, as with Linkerd's CRD")
	require.Len(t, crd.Spec.Versions, 1)
	v := crd.Spec.Versions[0]
	require.NotNil(t, v.Subresources)
	assert.NotNil(t, v.Subresources.Status, "Linkerd's controller writes status through the subresource")
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, []string{"trafficPolicy"}, spec.Required)
	var enum []string
	for _, e := range spec.Properties["trafficPolicy"].Enum {
		enum = append(enum, string(e.Raw))
	}
	assert.Equal(t, []string{`"Allow"`, `"Deny"`}, enum)
	networks := spec.Properties["networks"]
	assert.Nil(t, networks.MinItems, "an empty list is the webhook's to refuse, the one rule set")
	assert.Equal(t, []string{"cidr"}, networks.Items.Schema.Required)
}

func TestEveryCRDPassesTheAPIServersOwnValidation(t *testing.T) {
	// This is the validation kube-apiserver runs when a CRD is created:
	// structural schemas, defaults that survive pruning, CEL rules that
	// compile within the cost budget, version and name rules.
	all, err := crds.All()
	require.NoError(t, err)
	for _, crd := range all {
		t.Run(crd.Name, func(t *testing.T) { assertTheAPIServerAccepts(t, crd) })
	}
}

// assertTheAPIServerAccepts runs on crd the validation kube-apiserver
// runs when a CRD is created, as a CRD stored at its storage version.
func assertTheAPIServerAccepts(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	v1 := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
	internal := &apiextensions.CustomResourceDefinition{}
	require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, internal, nil))
	for _, v := range internal.Spec.Versions {
		if v.Storage {
			internal.Status.StoredVersions = []string{v.Name}
		}
	}
	errs := validation.ValidateCustomResourceDefinition(context.Background(), internal)
	assert.Empty(t, errs.ToAggregate(), "validation errors of %s", crd.Name)
}

func TestEveryRegisteredKindHasACRDVersionAndNoCRDVersionLacksAGoType(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		policyv1alpha1.AddToScheme, policyv1beta1.AddToScheme, policyv1beta2.AddToScheme,
		policyv1beta3.AddToScheme, spv1alpha2.AddToScheme,
	} {
		require.NoError(t, add(s))
	}

	all, err := crds.All()
	require.NoError(t, err)
	served := map[schema.GroupVersionKind]bool{}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			served[gvk] = true
			assert.True(t, s.Recognizes(gvk), "%s has a Go type", gvk)
			list := gvk
			list.Kind = crd.Spec.Names.ListKind
			assert.True(t, s.Recognizes(list), "%s has a Go type", list)
		}
	}
	for gvk := range s.AllKnownTypes() {
		if gvk.Group != "policy.linkerd.io" && gvk.Group != "linkerd.io" {
			continue
		}
		obj, err := s.New(gvk)
		require.NoError(t, err)
		if _, ok := obj.(interface{ GetNamespace() string }); !ok {
			continue // lists and the meta kinds AddToGroupVersion adds
		}
		assert.True(t, served[gvk], "%s is served by a CRD", gvk)
	}
}

func TestFilesHoldsOneManifestPerCRDNamedByGroupAndPlural(t *testing.T) {
	names, err := fs.Glob(crds.Files(), "*.yaml")
	require.NoError(t, err)
	want := make([]string, 0, len(wantCRDs))
	all, err := crds.All()
	require.NoError(t, err)
	for _, crd := range all {
		want = append(want, crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml")
	}
	sort.Strings(want)
	assert.Equal(t, want, names)
}

func TestGetRejectsAnUnknownName(t *testing.T) {
	_, err := crds.Get("gateways.gateway.networking.k8s.io")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `crds: no CRD named "gateways.gateway.networking.k8s.io"`)
}
