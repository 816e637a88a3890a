package sourcetest

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// The cases below are where Weft once disagreed with Linkerd's own tests
// (issue 18); each checks both what is allowed and what is denied.

// evaluate asks the current index about web-0.
func evaluate(t *testing.T, x *policy.Indexer, cl policy.Client, port intstr.IntOrString, req *authz.Request) policy.Result {
	t.Helper()
	res, err := x.Index().Evaluate(policy.Request{Workload: web, Port: port, Client: cl, HTTP: req})
	require.NoError(t, err)
	return res
}

// eventually waits until the index answers want.
func eventually(t *testing.T, x *policy.Indexer, cl policy.Client, port intstr.IntOrString, req *authz.Request, want authz.Decision, msg string) {
	t.Helper()
	eventuallyTrue(t, func() bool {
		res, err := x.Index().Evaluate(policy.Request{Workload: web, Port: port, Client: cl, HTTP: req})
		return err == nil && res.Decision == want
	}, msg)
}

func eventuallyTrue(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, cond, msg)
}

// probePod is web-0 with a liveness probe on port 5432 (path /healthz),
// declaring 5432 as a container port only when declare is true.
func probePod(declare bool) *corev1.Pod {
	p := WebPod()
	c := &p.Spec.Containers[0]
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(5432)}}}
	if declare {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "pg", ContainerPort: 5432})
	}
	return p
}

// sidecarPod is web-0 with a native sidecar (an init container with
// restartPolicy Always) serving port metrics (9100) and probed on
// /healthz there.
func sidecarPod() *corev1.Pod {
	p := WebPod()
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{{
		Name: "exporter", Image: "example/exporter", RestartPolicy: &always,
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString("METRICS")}}},
	}}
	return p
}

// metricsServer selects the sidecar's port 9100, HTTP/1, access deny.
func metricsServer() runtime.Object {
	s := Server()
	s.Name = "web-metrics"
	s.Spec.Port = intstr.FromInt32(9100)
	return s
}

func hasProblem(x *policy.Indexer, parts ...string) bool {
	for _, p := range x.Index().Problems() {
		s := p.String()
		all := true
		for _, part := range parts {
			all = all && strings.Contains(s, part)
		}
		if all {
			return true
		}
	}
	return false
}

func runLinkerdParity(t *testing.T, newHarness Factory) {
	anyone := policy.Client{Unauthenticated: true}
	gateway := policy.Client{Identity: GatewayID}
	healthz := &authz.Request{Method: "GET", Path: "/healthz"}

	t.Run("DefaultOpaquePortsApplyOnlyToPortsThePodDeclares", func(t *testing.T) {
		ns := Namespace(map[string]string{vocab.AnnotationDefaultInboundPolicy: "deny"})
		h := newHarness(t, ns, probePod(false))
		x := running(t, h.Source())
		// 5432 is not declared: it is not opaque, so the probe is HTTP and
		// the probe route admits it even under deny.
		eventually(t, x, anyone, intstr.FromInt32(5432), healthz, authz.Allow, "probe on an undeclared 5432 allowed as HTTP")
		assert.Equal(t, authz.Deny, evaluate(t, x, anyone, intstr.FromInt32(5432), &authz.Request{Method: "GET", Path: "/other"}).Decision,
			"anything but the probe is denied")
		assert.Equal(t, authz.ProtocolDetect, evaluate(t, x, anyone, intstr.FromInt32(5432), nil).Server.Protocol)

		// Declared, 5432 is a default opaque port: no HTTP, so no probe route.
		h.Set(t, ns, probePod(true))
		eventually(t, x, anyone, intstr.FromInt32(5432), healthz, authz.Deny, "probe on a declared (opaque) 5432 denied under deny")
		assert.Equal(t, authz.ProtocolOpaque, evaluate(t, x, anyone, intstr.FromInt32(5432), nil).Server.Protocol)
	})

	t.Run("ProbesOfNativeSidecarInitContainersAreAuthorized", func(t *testing.T) {
		h := newHarness(t, Namespace(nil), sidecarPod(), metricsServer())
		x := running(t, h.Source())
		eventually(t, x, anyone, intstr.FromInt32(9100), healthz, authz.Allow, "the sidecar's readiness probe is authorized")
		res := evaluate(t, x, anyone, intstr.FromInt32(9100), &authz.Request{Method: "GET", Path: "/metrics"})
		assert.Equal(t, authz.Deny, res.Decision, "only the probe path is")
		assert.Equal(t, authz.Deny, evaluate(t, x, anyone, intstr.FromInt32(9100), &authz.Request{Method: "POST", Path: "/healthz"}).Decision,
			"probes are GETs")
	})

	t.Run("ARouteNamingAServerByPortOrSectionAttachesToNoServer", func(t *testing.T) {
		r, ap := AdminRoute()
		admin := &authz.Request{Method: "GET", Path: "/admin/users"}
		h := newHarness(t, with(Base(), r, ap)...)
		x := running(t, h.Source())
		eventually(t, x, gateway, intstr.FromString("http"), admin, authz.Allow, "a plain Server parentRef attaches")

		port := gatewayv1.PortNumber(8080)
		byPort := r.DeepCopy()
		byPort.Spec.ParentRefs[0].Port = &port
		h.Set(t, with(Base(), byPort, ap)...)
		eventually(t, x, gateway, intstr.FromString("http"), admin, authz.Deny, "with a port the route is ignored, and its policy with it")
		assert.True(t, hasProblem(x, "web-admin", "spec.parentRefs[0].port", "Server by port"), "the route's problem says why")

		section := gatewayv1.SectionName("http")
		bySection := r.DeepCopy()
		bySection.Spec.ParentRefs[0].SectionName = &section
		h.Set(t, with(Base(), bySection, ap)...)
		eventuallyTrue(t, func() bool { return hasProblem(x, "spec.parentRefs[0].sectionName") }, "the section name problem")
		assert.Equal(t, authz.Deny, evaluate(t, x, gateway, intstr.FromString("http"), admin).Decision)
	})

	t.Run("ARouteWithAFilterLinkerdInboundDoesNotSupportIsIgnored", func(t *testing.T) {
		r, ap := AdminRoute()
		admin := &authz.Request{Method: "GET", Path: "/admin/users"}
		supported := r.DeepCopy()
		supported.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"x-debug"}}}}
		h := newHarness(t, with(Base(), supported, ap)...)
		x := running(t, h.Source())
		eventually(t, x, gateway, intstr.FromString("http"), admin, authz.Allow, "a header modifier is supported")

		for _, f := range []gatewayv1.HTTPRouteFilter{
			{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{}},
			{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: gatewayv1.BackendObjectReference{Name: "web"}}},
			{Type: gatewayv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gatewayv1.LocalObjectReference{Group: "example.com", Kind: "Thing", Name: "x"}},
		} {
			bad := r.DeepCopy()
			bad.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{f}
			h.Set(t, with(Base(), bad, ap)...)
			eventually(t, x, gateway, intstr.FromString("http"), admin, authz.Deny, string(f.Type)+": the route and its policy are ignored")
			assert.True(t, hasProblem(x, "web-admin", string(f.Type)+" filters are not supported"), string(f.Type))
			h.Set(t, with(Base(), supported, ap)...)
			eventually(t, x, gateway, intstr.FromString("http"), admin, authz.Allow, "back to a supported filter")
		}
	})

	t.Run("LoopbackClientsAreAlwaysAllowed", func(t *testing.T) {
		h := newHarness(t, Base()...)
		x := running(t, h.Source())
		eventually(t, x, anyone, intstr.FromString("http"), nil, authz.Deny, "the Server denies everyone")
		for _, ip := range []string{"127.0.0.1", "::1", "127.1.2.3"} {
			cl := policy.Client{Unauthenticated: true, IP: netip.MustParseAddr(ip)}
			res := evaluate(t, x, cl, intstr.FromString("http"), &authz.Request{Method: "DELETE", Path: "/anything"})
			assert.Equal(t, authz.Allow, res.Decision, ip)
			assert.Equal(t, authz.ReasonLoopback, res.Reason, ip)
			e, err := x.Index().Explain(policy.Request{Workload: web, Port: intstr.FromString("http"), Client: cl})
			require.NoError(t, err)
			assert.Contains(t, e.String(), "loopback", ip)
		}
		for _, ip := range []string{"10.42.0.20", "128.0.0.1", "::2"} {
			cl := policy.Client{Unauthenticated: true, IP: netip.MustParseAddr(ip)}
			assert.Equal(t, authz.Deny, evaluate(t, x, cl, intstr.FromString("http"), nil).Decision, ip)
		}
	})
}
