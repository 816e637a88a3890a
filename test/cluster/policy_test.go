//go:build clusterintegration

package cluster_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	serverGVR  = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}
	meshTLSGVR = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "meshtlsauthentications"}
	authzGVR   = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1alpha1", Resource: "authorizationpolicies"}
)

type policyObject struct {
	gvr schema.GroupVersionResource
	obj map[string]any
}

// policy is what a Linkerd user writes: a Server per backend port, the
// identities allowed on each, and an AuthorizationPolicy tying them.
func (m *mesh) policy() []policyObject {
	server := func(name string, port int, proto string) policyObject {
		return policyObject{serverGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"podSelector":   map[string]any{"matchLabels": map[string]any{"app": "backend"}},
				"port":          port,
				"proxyProtocol": proto,
			},
		}}
	}
	authn := func(name, sa string) policyObject {
		return policyObject{meshTLSGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "MeshTLSAuthentication",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"identities": []any{identityOf(sa, m.app)}},
		}}
	}
	authz := func(name, server, authn string) policyObject {
		return policyObject{authzGVR, map[string]any{
			"apiVersion": "policy.linkerd.io/v1alpha1", "kind": "AuthorizationPolicy",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"targetRef": map[string]any{"group": "policy.linkerd.io", "kind": "Server", "name": server},
				"requiredAuthenticationRefs": []any{
					map[string]any{"group": "policy.linkerd.io", "kind": "MeshTLSAuthentication", "name": authn},
				},
			},
		}}
	}
	return []policyObject{
		server("backend-http", httpPort, "HTTP/1"),
		server("backend-echo", tcpPort, "opaque"),
		authn("frontend-only", "frontend"),
		authn("client-only", "client"),
		authz("backend-http-from-frontend", "backend-http", "frontend-only"),
		authz("backend-echo-from-client", "backend-echo", "client-only"),
	}
}

func (m *mesh) applyPolicy(t *testing.T) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	for _, p := range m.policy() {
		_, err := m.e.dyn.Resource(p.gvr).Namespace(m.app).Create(ctx, &unstructured.Unstructured{Object: p.obj}, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s", p.obj["kind"])
	}
}

func (m *mesh) deletePolicy(t *testing.T) {
	t.Helper()
	m.deleteObjects(t, m.app, m.policy())
}
