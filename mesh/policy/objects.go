package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/policy/v1beta1"
	"github.com/weftmesh/weft/apis/policy/v1beta2"
	"github.com/weftmesh/weft/apis/policy/v1beta3"
)

// ObjectRef names an object: its kind as Kubernetes spells it
// ("AuthorizationPolicy"), namespace and name.
type ObjectRef struct {
	Kind      string
	Namespace string
	Name      string
}

// String renders "Server my-app/web-http".
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Location is where an object was read from: a file and 1-based document
// number, or nothing for objects from a cluster.
type Location struct {
	File     string
	Document int
}

// String renders "web.yaml document 2", or "" when unknown.
func (l Location) String() string {
	if l.File == "" {
		return ""
	}
	if l.Document == 0 {
		return l.File
	}
	return fmt.Sprintf("%s document %d", l.File, l.Document)
}

// Workload is a pod, or the pod template of a controller (Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job, CronJob): what Servers select
// and clients connect to.
type Workload struct {
	// Kind is the object's kind ("Pod", "Deployment").
	Kind        string
	Namespace   string
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// ServiceAccount is the pod's service account ("default" when unset).
	ServiceAccount string
	// Containers and InitContainers hold the ports and probes.
	Containers     []corev1.Container
	InitContainers []corev1.Container
	// IPs are the pod's addresses (pods only).
	IPs []netip.Addr
	// Created orders objects; zero when unknown.
	Created metav1.Time
}

// Ref returns the workload's reference ("deployment/web" in its namespace).
func (w *Workload) Ref() WorkloadRef {
	return WorkloadRef{Namespace: w.Namespace, Kind: strings.ToLower(w.Kind), Name: w.Name}
}

// WorkloadRef names a workload: namespace, lower-case kind ("pod",
// "deployment") and name.
type WorkloadRef struct {
	Namespace string
	Kind      string
	Name      string
}

// String renders "deployment/web in my-app".
func (r WorkloadRef) String() string { return r.Kind + "/" + r.Name + " in " + r.Namespace }

var workloadKinds = map[string]string{
	"pod": "pod", "pods": "pod", "po": "pod",
	"deployment": "deployment", "deployments": "deployment", "deploy": "deployment",
	"statefulset": "statefulset", "statefulsets": "statefulset", "sts": "statefulset",
	"daemonset": "daemonset", "daemonsets": "daemonset", "ds": "daemonset",
	"replicaset": "replicaset", "replicasets": "replicaset", "rs": "replicaset",
	"job": "job", "jobs": "job",
	"cronjob": "cronjob", "cronjobs": "cronjob", "cj": "cronjob",
}

// ParseKindName reads a workload reference as people write it, "kind/name"
// ("deployment/web", "pod/web-0", kubectl's short kinds work too), in
// namespace ns ("default" if empty). ParseProxyWorkload reads the form
// proxies send.
func ParseKindName(s, ns string) (WorkloadRef, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || name == "" || kind == "" || strings.Contains(name, "/") {
		return WorkloadRef{}, fmt.Errorf("policy: workload %q: want kind/name, such as deployment/web or pod/web-0", s)
	}
	k, ok := workloadKinds[strings.ToLower(kind)]
	if !ok {
		return WorkloadRef{}, fmt.Errorf("policy: workload %q: unknown kind %q (want pod, deployment, statefulset, daemonset, replicaset, job or cronjob)", s, kind)
	}
	if ns == "" {
		ns = "default"
	}
	return WorkloadRef{Namespace: ns, Kind: k, Name: name}, nil
}

// Objects is a snapshot of every object policy reads. Sources build one
// and never change it afterwards; the index only reads it.
type Objects struct {
	Namespaces             []*corev1.Namespace
	Workloads              []*Workload
	ServiceAccounts        []*corev1.ServiceAccount
	Services               []*corev1.Service
	Servers                []*v1beta3.Server
	ServerAuthorizations   []*v1beta1.ServerAuthorization
	AuthorizationPolicies  []*v1alpha1.AuthorizationPolicy
	MeshTLSAuthentications []*v1alpha1.MeshTLSAuthentication
	NetworkAuthentications []*v1alpha1.NetworkAuthentication
	// HTTPRoutes holds policy.linkerd.io HTTPRoutes; GatewayHTTPRoutes
	// and GRPCRoutes the gateway.networking.k8s.io ones.
	HTTPRoutes        []*v1beta3.HTTPRoute
	GatewayHTTPRoutes []*gatewayv1.HTTPRoute
	GRPCRoutes        []*gatewayv1.GRPCRoute
	// TCPRoutes and TLSRoutes are the Gateway API TCPRoutes and
	// TLSRoutes, v1alpha2 ones (as Linkerd's manifests write them)
	// converted to v1, the same fields.
	TCPRoutes []*gatewayv1.TCPRoute
	TLSRoutes []*gatewayv1.TLSRoute
	// HTTPLocalRateLimitPolicies limit the request rate of Servers.
	HTTPLocalRateLimitPolicies []*v1alpha1.HTTPLocalRateLimitPolicy
	// EgressNetworks say what proxies do with traffic to addresses
	// outside the cluster.
	EgressNetworks []*v1alpha1.EgressNetwork

	locations map[ObjectRef]Location
}

// Location returns where the object was read from, if known.
func (o *Objects) Location(ref ObjectRef) Location {
	if o == nil {
		return Location{}
	}
	return o.locations[ref]
}

// Len returns the number of objects.
func (o *Objects) Len() int {
	return len(o.Namespaces) + len(o.Workloads) + len(o.ServiceAccounts) + len(o.Services) + len(o.Servers) +
		len(o.ServerAuthorizations) + len(o.AuthorizationPolicies) + len(o.MeshTLSAuthentications) +
		len(o.NetworkAuthentications) + len(o.HTTPRoutes) + len(o.GatewayHTTPRoutes) + len(o.GRPCRoutes) +
		len(o.HTTPLocalRateLimitPolicies) + len(o.EgressNetworks) + len(o.TCPRoutes) + len(o.TLSRoutes)
}

// ObjectsFromManifests collects decoded manifests (see
// apis/manifest.LoadPaths), remembering where each came from.
func ObjectsFromManifests(objs []manifest.Object) (*Objects, error) {
	o := &Objects{}
	var errs []string
	for _, m := range objs {
		if err := o.Add(m.Object, Location{File: m.Source, Document: m.Document}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return o, nil
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// Add records one object. Kinds policy does not read (ConfigMaps,
// Secrets, ServiceProfiles, ...) are ignored. Servers of every version are
// converted to v1beta3. An object defined twice is an error naming both
// places.
func (o *Objects) Add(obj runtime.Object, loc Location) error {
	if o.locations == nil {
		o.locations = map[ObjectRef]Location{}
	}
	record := func(kind string, meta *metav1.ObjectMeta, namespaced bool) error {
		if namespaced {
			meta.Namespace = nsOrDefault(meta.Namespace)
		}
		ref := ObjectRef{Kind: kind, Namespace: meta.Namespace, Name: meta.Name}
		if prev, dup := o.locations[ref]; dup {
			where := prev.String()
			if where == "" {
				where = "another object"
			}
			here := loc.String()
			if here != "" {
				here += ": "
			}
			return fmt.Errorf("policy: %s%s is defined twice (also in %s)", here, ref, where)
		}
		o.locations[ref] = loc
		return nil
	}
	switch v := obj.(type) {
	case *corev1.Namespace:
		v = v.DeepCopy()
		if err := record("Namespace", &v.ObjectMeta, false); err != nil {
			return err
		}
		o.Namespaces = append(o.Namespaces, v)
	case *corev1.ServiceAccount:
		v = v.DeepCopy()
		if err := record("ServiceAccount", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.ServiceAccounts = append(o.ServiceAccounts, v)
	case *corev1.Service:
		v = v.DeepCopy()
		if err := record("Service", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.Services = append(o.Services, v)
	case *corev1.Pod:
		v = v.DeepCopy()
		if err := record("Pod", &v.ObjectMeta, true); err != nil {
			return err
		}
		w := PodWorkload(v)
		o.Workloads = append(o.Workloads, w)
	case *appsv1.Deployment:
		return o.addController("Deployment", &v.ObjectMeta, &v.Spec.Template, record)
	case *appsv1.StatefulSet:
		return o.addController("StatefulSet", &v.ObjectMeta, &v.Spec.Template, record)
	case *appsv1.DaemonSet:
		return o.addController("DaemonSet", &v.ObjectMeta, &v.Spec.Template, record)
	case *appsv1.ReplicaSet:
		return o.addController("ReplicaSet", &v.ObjectMeta, &v.Spec.Template, record)
	case *batchv1.Job:
		return o.addController("Job", &v.ObjectMeta, &v.Spec.Template, record)
	case *batchv1.CronJob:
		return o.addController("CronJob", &v.ObjectMeta, &v.Spec.JobTemplate.Spec.Template, record)
	case *v1beta3.Server:
		v = v.DeepCopy()
		if err := record("Server", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.Servers = append(o.Servers, v)
	case *v1beta2.Server:
		s := &v1beta3.Server{ObjectMeta: *v.ObjectMeta.DeepCopy(), Spec: v1beta3.ServerSpec{
			PodSelector:              v.Spec.PodSelector.DeepCopy(),
			ExternalWorkloadSelector: v.Spec.ExternalWorkloadSelector.DeepCopy(),
			Port:                     v.Spec.Port,
			ProxyProtocol:            v1beta3.ProxyProtocol(v.Spec.ProxyProtocol),
		}}
		if err := record("Server", &s.ObjectMeta, true); err != nil {
			return err
		}
		o.Servers = append(o.Servers, s)
	case *v1beta1.Server:
		s := &v1beta3.Server{ObjectMeta: *v.ObjectMeta.DeepCopy(), Spec: v1beta3.ServerSpec{
			PodSelector:   v.Spec.PodSelector.DeepCopy(),
			Port:          v.Spec.Port,
			ProxyProtocol: v1beta3.ProxyProtocol(v.Spec.ProxyProtocol),
		}}
		if err := record("Server", &s.ObjectMeta, true); err != nil {
			return err
		}
		o.Servers = append(o.Servers, s)
	case *v1beta1.ServerAuthorization:
		v = v.DeepCopy()
		if err := record("ServerAuthorization", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.ServerAuthorizations = append(o.ServerAuthorizations, v)
	case *v1alpha1.AuthorizationPolicy:
		v = v.DeepCopy()
		if err := record("AuthorizationPolicy", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.AuthorizationPolicies = append(o.AuthorizationPolicies, v)
	case *v1alpha1.MeshTLSAuthentication:
		v = v.DeepCopy()
		if err := record("MeshTLSAuthentication", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.MeshTLSAuthentications = append(o.MeshTLSAuthentications, v)
	case *v1alpha1.NetworkAuthentication:
		v = v.DeepCopy()
		if err := record("NetworkAuthentication", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.NetworkAuthentications = append(o.NetworkAuthentications, v)
	case *v1alpha1.HTTPLocalRateLimitPolicy:
		v = v.DeepCopy()
		if err := record("HTTPLocalRateLimitPolicy", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.HTTPLocalRateLimitPolicies = append(o.HTTPLocalRateLimitPolicies, v)
	case *v1alpha1.EgressNetwork:
		v = v.DeepCopy()
		if err := record("EgressNetwork", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.EgressNetworks = append(o.EgressNetworks, v)
	case *v1beta3.HTTPRoute:
		v = v.DeepCopy()
		if err := record("HTTPRoute.policy.linkerd.io", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.HTTPRoutes = append(o.HTTPRoutes, v)
	case *gatewayv1.HTTPRoute:
		v = v.DeepCopy()
		if err := record("HTTPRoute.gateway.networking.k8s.io", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.GatewayHTTPRoutes = append(o.GatewayHTTPRoutes, v)
	case *gatewayv1.GRPCRoute:
		v = v.DeepCopy()
		if err := record("GRPCRoute", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.GRPCRoutes = append(o.GRPCRoutes, v)
	case *gatewayv1.TCPRoute:
		v = v.DeepCopy()
		if err := record("TCPRoute", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.TCPRoutes = append(o.TCPRoutes, v)
	case *gatewayv1alpha2.TCPRoute:
		r := tcpRouteV1(v.DeepCopy())
		if err := record("TCPRoute", &r.ObjectMeta, true); err != nil {
			return err
		}
		o.TCPRoutes = append(o.TCPRoutes, r)
	case *gatewayv1.TLSRoute:
		v = v.DeepCopy()
		if err := record("TLSRoute", &v.ObjectMeta, true); err != nil {
			return err
		}
		o.TLSRoutes = append(o.TLSRoutes, v)
	case *gatewayv1alpha2.TLSRoute:
		r := tlsRouteV1(v.DeepCopy())
		if err := record("TLSRoute", &r.ObjectMeta, true); err != nil {
			return err
		}
		o.TLSRoutes = append(o.TLSRoutes, r)
	}
	return nil
}

func (o *Objects) addController(kind string, meta *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec, record func(string, *metav1.ObjectMeta, bool) error) error {
	meta = meta.DeepCopy()
	if err := record(kind, meta, true); err != nil {
		return err
	}
	t := tmpl.DeepCopy()
	o.Workloads = append(o.Workloads, workloadFromTemplate(kind, meta, &t.ObjectMeta, &t.Spec))
	return nil
}

// PodWorkload describes a pod as a Workload. The Workload shares the
// pod's maps and slices, so neither may be changed afterwards.
func PodWorkload(p *corev1.Pod) *Workload {
	w := workloadFromTemplate("Pod", &p.ObjectMeta, &p.ObjectMeta, &p.Spec)
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			w.IPs = append(w.IPs, a.Unmap())
		}
	}
	if len(w.IPs) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			w.IPs = append(w.IPs, a.Unmap())
		}
	}
	return w
}

func workloadFromTemplate(kind string, owner, podMeta *metav1.ObjectMeta, spec *corev1.PodSpec) *Workload {
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa == "" {
		sa = "default"
	}
	return &Workload{
		Kind:           kind,
		Namespace:      nsOrDefault(owner.Namespace),
		Name:           owner.Name,
		Labels:         podMeta.Labels,
		Annotations:    podMeta.Annotations,
		ServiceAccount: sa,
		Containers:     spec.Containers,
		InitContainers: spec.InitContainers,
		Created:        owner.CreationTimestamp,
	}
}

// sortAll orders every list by namespace and name, so that building an
// index does not depend on the order sources deliver objects in.
func (o *Objects) sortAll() {
	byMeta := func(a, b *metav1.ObjectMeta) bool {
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	}
	sort.SliceStable(o.Namespaces, func(i, j int) bool { return o.Namespaces[i].Name < o.Namespaces[j].Name })
	sort.SliceStable(o.Workloads, func(i, j int) bool {
		a, b := o.Workloads[i], o.Workloads[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	sort.SliceStable(o.ServiceAccounts, func(i, j int) bool { return byMeta(&o.ServiceAccounts[i].ObjectMeta, &o.ServiceAccounts[j].ObjectMeta) })
	sort.SliceStable(o.Services, func(i, j int) bool { return byMeta(&o.Services[i].ObjectMeta, &o.Services[j].ObjectMeta) })
	sort.SliceStable(o.Servers, func(i, j int) bool { return byMeta(&o.Servers[i].ObjectMeta, &o.Servers[j].ObjectMeta) })
	sort.SliceStable(o.ServerAuthorizations, func(i, j int) bool {
		return byMeta(&o.ServerAuthorizations[i].ObjectMeta, &o.ServerAuthorizations[j].ObjectMeta)
	})
	sort.SliceStable(o.AuthorizationPolicies, func(i, j int) bool {
		return byMeta(&o.AuthorizationPolicies[i].ObjectMeta, &o.AuthorizationPolicies[j].ObjectMeta)
	})
	sort.SliceStable(o.MeshTLSAuthentications, func(i, j int) bool {
		return byMeta(&o.MeshTLSAuthentications[i].ObjectMeta, &o.MeshTLSAuthentications[j].ObjectMeta)
	})
	sort.SliceStable(o.NetworkAuthentications, func(i, j int) bool {
		return byMeta(&o.NetworkAuthentications[i].ObjectMeta, &o.NetworkAuthentications[j].ObjectMeta)
	})
	sort.SliceStable(o.HTTPRoutes, func(i, j int) bool { return byMeta(&o.HTTPRoutes[i].ObjectMeta, &o.HTTPRoutes[j].ObjectMeta) })
	sort.SliceStable(o.GatewayHTTPRoutes, func(i, j int) bool {
		return byMeta(&o.GatewayHTTPRoutes[i].ObjectMeta, &o.GatewayHTTPRoutes[j].ObjectMeta)
	})
	sort.SliceStable(o.GRPCRoutes, func(i, j int) bool { return byMeta(&o.GRPCRoutes[i].ObjectMeta, &o.GRPCRoutes[j].ObjectMeta) })
	sort.SliceStable(o.TCPRoutes, func(i, j int) bool { return byMeta(&o.TCPRoutes[i].ObjectMeta, &o.TCPRoutes[j].ObjectMeta) })
	sort.SliceStable(o.TLSRoutes, func(i, j int) bool { return byMeta(&o.TLSRoutes[i].ObjectMeta, &o.TLSRoutes[j].ObjectMeta) })
	sort.SliceStable(o.HTTPLocalRateLimitPolicies, func(i, j int) bool {
		return byMeta(&o.HTTPLocalRateLimitPolicies[i].ObjectMeta, &o.HTTPLocalRateLimitPolicies[j].ObjectMeta)
	})
	sort.SliceStable(o.EgressNetworks, func(i, j int) bool { return byMeta(&o.EgressNetworks[i].ObjectMeta, &o.EgressNetworks[j].ObjectMeta) })
}

// tcpRouteV1 converts a v1alpha2 TCPRoute to v1: the same fields (the
// rule and status types of v1alpha2 are v1's). The apiVersion becomes v1.
func tcpRouteV1(r *gatewayv1alpha2.TCPRoute) *gatewayv1.TCPRoute {
	out := &gatewayv1.TCPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "TCPRoute"},
		ObjectMeta: r.ObjectMeta,
		Spec:       gatewayv1.TCPRouteSpec{CommonRouteSpec: r.Spec.CommonRouteSpec},
		Status:     gatewayv1.TCPRouteStatus(r.Status),
	}
	for _, rule := range r.Spec.Rules {
		out.Spec.Rules = append(out.Spec.Rules, gatewayv1.TCPRouteRule(rule))
	}
	return out
}

// tlsRouteV1 converts a v1alpha2 TLSRoute to v1, as tcpRouteV1.
func tlsRouteV1(r *gatewayv1alpha2.TLSRoute) *gatewayv1.TLSRoute {
	out := &gatewayv1.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "TLSRoute"},
		ObjectMeta: r.ObjectMeta,
		Spec:       gatewayv1.TLSRouteSpec{CommonRouteSpec: r.Spec.CommonRouteSpec, Hostnames: r.Spec.Hostnames},
		Status:     gatewayv1.TLSRouteStatus(r.Status),
	}
	for _, rule := range r.Spec.Rules {
		out.Spec.Rules = append(out.Spec.Rules, gatewayv1.TLSRouteRule(rule))
	}
	return out
}
