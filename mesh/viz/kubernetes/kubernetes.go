// Package kubernetes is the cluster source of viz: it lists the meshed
// pods with client-go and reads each proxy's /metrics through the
// Kubernetes API server's pod proxy (GET
// /api/v1/namespaces/NS/pods/NAME:ADMINPORT/proxy/metrics), so `weft viz`
// answers with nothing installed in the cluster beyond the proxies. The
// caller needs RBAC to list pods and to get pods/proxy in the namespaces
// it reads.
//
// Tap goes through the control plane's tap API instead (tap.go, package
// mesh/viz/tapapi): the API server's pod proxy cannot carry the tapper's
// mutual TLS. The same package holds the tap component's Kubernetes side:
// the SubjectAccessReview authorizer, the requestheader settings of
// kube-system/extension-apiserver-authentication and the pod lister.
//
// What it trusts: the API server (authenticated by the kubeconfig) for
// the pod list, and each proxy's answer as input (package viz caps it);
// the labels that place a series come from the pod object, not from the
// proxy.
package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/viz"
)

// Source lists meshed pods and reads their proxies through the API
// server.
type Source struct {
	client      kubernetes.Interface
	namespace   string
	trustDomain string
	tapREST     rest.Interface
}

// Option tunes New.
type Option func(*Source)

// WithNamespace restricts the source to one namespace (default: all the
// caller may list).
func WithNamespace(ns string) Option { return func(s *Source) { s.namespace = ns } }

// WithTrustDomain sets the trust domain of identity names (default
// cluster.local).
func WithTrustDomain(td string) Option { return func(s *Source) { s.trustDomain = td } }

// New returns a source over client.
func New(client kubernetes.Interface, opts ...Option) *Source {
	s := &Source{client: client, trustDomain: vocab.DefaultTrustDomain}
	for _, o := range opts {
		o(s)
	}
	return s
}

// MaxPods bounds the pods listed in one call.
const MaxPods = 5000

// Targets lists the running pods that carry a proxy (the
// linkerd.io/control-plane-ns label injection sets).
func (s *Source) Targets(ctx context.Context) ([]viz.Target, error) {
	list, err := s.client.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: vocab.LabelControlPlaneNamespace, Limit: MaxPods})
	if err != nil {
		return nil, fmt.Errorf("viz/kubernetes: listing meshed pods: %w", err)
	}
	var out []viz.Target
	for i := range list.Items {
		if t, ok := s.target(&list.Items[i]); ok {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

func (s *Source) target(p *corev1.Pod) (viz.Target, bool) {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return viz.Target{}, false
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	t := viz.Target{Namespace: p.Namespace, Pod: p.Name, ServiceAccount: sa,
		Identity: fmt.Sprintf("%s.%s.serviceaccount.identity.%s.%s", sa, p.Namespace, p.Labels[vocab.LabelControlPlaneNamespace], s.trustDomain)}
	t.WorkloadKind, t.Workload = owner(p)
	if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
		t.IP = ip
	}
	t.Admin = strconv.Itoa(adminPort(p))
	if port := tapPort(p); port != "" && t.IP.IsValid() {
		t.Tap = net.JoinHostPort(t.IP.String(), port)
	}
	return t, true
}

// tapPort is the port of the proxy's tap server, from the proxy
// container's WEFT_PROXY_TAP_ADDR, or "" when the proxy serves no tap (the
// injector sets the address only with tapper identities).
func tapPort(p *corev1.Pod) string {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != vocab.ProxyContainerName {
				continue
			}
			for _, e := range c.Env {
				if e.Name != vocab.EnvTapAddr {
					continue
				}
				_, port, err := net.SplitHostPort(e.Value)
				if n, perr := strconv.Atoi(port); err != nil || perr != nil || n <= 0 || n > 65535 {
					return ""
				}
				return port
			}
		}
	}
	return ""
}

// owner names the pod's workload as Linkerd's labels do: a ReplicaSet of
// a Deployment is reported as the Deployment.
func owner(p *corev1.Pod) (string, string) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return "", ""
	}
	kind := strings.ToLower(ref.Kind)
	if kind == "job" {
		kind = "k8s_job"
	}
	if kind == "replicaset" {
		if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			return "deployment", strings.TrimSuffix(ref.Name, "-"+h)
		}
	}
	return kind, ref.Name
}

// adminPort is the proxy's admin port: the annotation, else the proxy
// container's port named weft-admin (or linkerd-admin), else 4191.
func adminPort(p *corev1.Pod) int {
	if v, err := strconv.Atoi(p.Annotations[vocab.AnnotationAdminPort]); err == nil && v > 0 && v < 65536 {
		return v
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.Name == vocab.AdminPortName || cp.Name == "linkerd-admin" {
					return int(cp.ContainerPort)
				}
			}
		}
	}
	return vocab.DefaultAdminPort
}

// Metrics reads the proxy's /metrics through the API server's pod proxy.
func (s *Source) Metrics(ctx context.Context, t viz.Target) (io.ReadCloser, error) {
	rc, err := s.client.CoreV1().Pods(t.Namespace).ProxyGet("http", t.Pod, t.Admin, "/metrics", nil).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("viz/kubernetes: %s: %w", t, err)
	}
	return rc, nil
}
