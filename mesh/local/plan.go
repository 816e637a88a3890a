package local

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
)

// ClusterDomain is the DNS suffix of the local mesh's Services.
const ClusterDomain = "cluster.local"

// Domain is the identity domain of the local mesh: control-plane namespace
// "weft", trust domain "cluster.local", as a default installation.
var Domain = identity.Domain{ControlPlaneNamespace: vocab.DefaultControlPlaneNamespace, TrustDomain: vocab.DefaultTrustDomain}

// LabelApp selects a workload's pods.
const LabelApp = "app"

// Plan is a mesh file laid out on this machine: one pod per replica, each
// with its own loopback address, and the Kubernetes objects that describe
// them to the control plane. NewPlan is pure.
type Plan struct {
	File *File
	Pods []Pod
	// Objects are Namespaces, ServiceAccounts, Pods, Services,
	// EndpointSlices and the policy objects the compact policies expand to.
	Objects []runtime.Object
}

// Pod is one replica of a workload.
type Pod struct {
	Workload       string
	Namespace      string
	Name           string
	ServiceAccount string
	// Identity is the name in the pod's certificate.
	Identity string
	// IP is the pod's loopback address: its program listens on IP:port,
	// its proxy on IP:4143 (inbound), IP:4191 (admin) and IP:4190 (tap).
	IP      netip.Addr
	Ports   []Port
	Inbound netip.AddrPort
	Admin   netip.AddrPort
	// Tap is the proxy's tap server (TapPort), open to TapperIdentity.
	Tap      netip.AddrPort
	Mappings []Mapping
	Command  []string
	Env      map[string]string
}

// Mapping is an outbound listener of a pod's proxy: the program connects
// to Listen and reaches Authority.
type Mapping struct {
	Listen    netip.AddrPort
	Authority string
	// Service is the called workload (NAMESPACE/NAME) and Port its port.
	Service string
	Port    int
}

// Authority is the name a Service port is reached by.
func Authority(namespace, service string, port int) string {
	return fmt.Sprintf("%s.%s.svc.%s:%d", service, namespace, ClusterDomain, port)
}

// NewPlan gives every pod an address in the /24 starting at base (pods get
// .1, .2, ... in file order) and builds the objects.
func NewPlan(f *File, base netip.Addr) (*Plan, error) {
	if !base.Is4() || !base.IsLoopback() {
		return nil, fmt.Errorf("local: address base %s: want an IPv4 loopback address", base)
	}
	b := base.As4()
	p := &Plan{File: f}
	next := 1
	byWorkload := map[string][]*Pod{}
	for i := range f.Workloads {
		w := &f.Workloads[i]
		name, err := Domain.Name(w.Namespace, w.ServiceAccount)
		if err != nil {
			return nil, fmt.Errorf("local: workload %s: %w", w.Name, err)
		}
		for r := 0; r < w.Replicas; r++ {
			if next > 254 {
				return nil, fmt.Errorf("local: more than 254 pods")
			}
			ip := netip.AddrFrom4([4]byte{b[0], b[1], b[2], byte(next)})
			next++
			pod := Pod{
				Workload: w.Name, Namespace: w.Namespace, Name: fmt.Sprintf("%s-%d", w.Name, r),
				ServiceAccount: w.ServiceAccount, Identity: name.String(), IP: ip,
				Ports:   append([]Port(nil), w.Ports...),
				Inbound: netip.AddrPortFrom(ip, InboundPort), Admin: netip.AddrPortFrom(ip, AdminPort),
				Tap:     netip.AddrPortFrom(ip, TapPort),
				Command: append([]string(nil), w.Command...), Env: w.Env,
			}
			for _, c := range w.Calls {
				target, _ := f.lookup(c.Service, w.Namespace)
				pod.Mappings = append(pod.Mappings, Mapping{
					Listen:    netip.AddrPortFrom(ip, uint16(c.LocalPort)),
					Authority: Authority(target.Namespace, target.Name, c.Port.IntValue()),
					Service:   target.Namespace + "/" + target.Name,
					Port:      c.Port.IntValue(),
				})
			}
			p.Pods = append(p.Pods, pod)
		}
	}
	for i := range p.Pods {
		byWorkload[p.Pods[i].Namespace+"/"+p.Pods[i].Workload] = append(byWorkload[p.Pods[i].Namespace+"/"+p.Pods[i].Workload], &p.Pods[i])
	}
	p.Objects = objects(f, byWorkload)
	return p, nil
}

func objects(f *File, pods map[string][]*Pod) []runtime.Object {
	var out []runtime.Object
	namespaces := map[string]bool{}
	accounts := map[string]bool{}
	for _, w := range f.Workloads {
		namespaces[w.Namespace] = true
		accounts[w.Namespace+"/"+w.ServiceAccount] = true
	}
	for _, ns := range sortedKeys(namespaces) {
		out = append(out, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns},
		})
	}
	for _, sa := range sortedKeys(accounts) {
		ns, name, _ := strings.Cut(sa, "/")
		out = append(out, &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		})
	}
	for _, w := range f.Workloads {
		var opaque []string
		var cports []corev1.ContainerPort
		var sports []corev1.ServicePort
		var eports []discoveryv1.EndpointPort
		for _, p := range w.Ports {
			cports = append(cports, corev1.ContainerPort{Name: p.Name, ContainerPort: int32(p.Port), Protocol: corev1.ProtocolTCP})
			name := p.Name
			if name == "" {
				name = "port-" + strconv.Itoa(p.Port)
			}
			sports = append(sports, corev1.ServicePort{Name: name, Port: int32(p.Port), TargetPort: intstr.FromInt32(int32(p.Port)), Protocol: corev1.ProtocolTCP})
			eports = append(eports, discoveryv1.EndpointPort{Name: ptr(name), Port: ptr(int32(p.Port)), Protocol: ptr(corev1.ProtocolTCP)})
			if p.Opaque {
				opaque = append(opaque, strconv.Itoa(p.Port))
			}
		}
		var eps []discoveryv1.Endpoint
		for _, pod := range pods[w.Namespace+"/"+w.Name] {
			ann := map[string]string{
				vocab.AnnotationInject:                        vocab.InjectEnabled,
				vocab.ConfigPrefix + "default-inbound-policy": f.DefaultInboundPolicy,
			}
			if len(opaque) > 0 {
				ann[vocab.ConfigPrefix+"opaque-ports"] = strings.Join(opaque, ",")
			}
			// Pods belong to a Deployment's ReplicaSet, as in a cluster, so
			// that discovery labels them deployment=<workload> (metrics'
			// dst_deployment) and tools group them the same way.
			hash := templateHash(w.Namespace, w.Name)
			out = append(out, &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: pod.Name, Namespace: pod.Namespace,
					Labels: map[string]string{
						LabelApp:                         w.Name,
						labelPodTemplateHash:             hash,
						vocab.LabelControlPlaneNamespace: Domain.ControlPlaneNamespace,
						vocab.LabelWorkloadNamespace:     w.Namespace,
					},
					Annotations: ann,
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "apps/v1", Kind: "ReplicaSet", Name: w.Name + "-" + hash,
						UID: types.UID("local-" + w.Namespace + "-" + w.Name), Controller: ptr(true),
					}},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName: w.ServiceAccount,
					Containers: []corev1.Container{
						{Name: "app", Image: "local", Ports: cports},
						{Name: vocab.ProxyContainerName, Image: "local", Env: []corev1.EnvVar{
							{Name: vocab.EnvInboundAddr, Value: pod.Inbound.String()},
							{Name: vocab.EnvAdminAddr, Value: pod.Admin.String()},
							{Name: vocab.EnvTapAddr, Value: pod.Tap.String()},
							{Name: vocab.EnvTapIdentities, Value: TapperIdentity},
						}},
					},
				},
				Status: corev1.PodStatus{
					Phase:      corev1.PodRunning,
					PodIP:      pod.IP.String(),
					PodIPs:     []corev1.PodIP{{IP: pod.IP.String()}},
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				},
			})
			eps = append(eps, discoveryv1.Endpoint{
				Addresses:  []string{pod.IP.String()},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod.Name, Namespace: pod.Namespace},
			})
		}
		if len(w.Ports) == 0 {
			continue
		}
		out = append(out, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{LabelApp: w.Name}, Ports: sports},
		})
		out = append(out, &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name: w.Name + "-local", Namespace: w.Namespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: w.Name},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports:       eports,
		})
	}
	for _, pol := range f.Policies {
		ns, wl, _ := strings.Cut(pol.Workload, "/")
		server := wl + "-" + strings.ToLower(pol.Port.String())
		out = append(out, &policyv1beta3.Server{
			TypeMeta:   metav1.TypeMeta{APIVersion: policyv1beta3.SchemeGroupVersion.String(), Kind: "Server"},
			ObjectMeta: metav1.ObjectMeta{Name: server, Namespace: ns},
			Spec: policyv1beta3.ServerSpec{
				PodSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: wl}},
				Port:         pol.Port,
				AccessPolicy: "deny",
			},
		})
		var refs []policyv1alpha1.IdentityRef
		for _, a := range pol.Allow {
			cns, cname, _ := strings.Cut(a, "/")
			client, _ := f.lookup(cname, cns)
			refs = append(refs, policyv1alpha1.IdentityRef{
				Kind: "ServiceAccount", Name: ptr(gatewayv1.ObjectName(client.ServiceAccount)), Namespace: ptr(cns),
			})
		}
		out = append(out, &policyv1alpha1.MeshTLSAuthentication{
			TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.SchemeGroupVersion.String(), Kind: "MeshTLSAuthentication"},
			ObjectMeta: metav1.ObjectMeta{Name: server + "-clients", Namespace: ns},
			Spec:       policyv1alpha1.MeshTLSAuthenticationSpec{IdentityRefs: refs},
		})
		out = append(out, &policyv1alpha1.AuthorizationPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.SchemeGroupVersion.String(), Kind: "AuthorizationPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: server + "-allow", Namespace: ns},
			Spec: policyv1alpha1.AuthorizationPolicySpec{
				TargetRef: policyv1alpha1.TargetRef{Group: policyv1beta3.GroupName, Kind: "Server", Name: gatewayv1.ObjectName(server)},
				RequiredAuthenticationRefs: []policyv1alpha1.NamespacedTargetRef{
					{Group: policyv1alpha1.GroupName, Kind: "MeshTLSAuthentication", Name: gatewayv1.ObjectName(server + "-clients")},
				},
			},
		})
	}
	return out
}

// YAML renders the objects as one multi-document manifest.
func (p *Plan) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range p.Objects {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("local: rendering object %d: %w", i, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// Pod returns the pod named namespace/name.
func (p *Plan) Pod(namespace, name string) (Pod, bool) {
	for _, pod := range p.Pods {
		if pod.Namespace == namespace && pod.Name == name {
			return pod, true
		}
	}
	return Pod{}, false
}

func ptr[T any](v T) *T { return &v }

// labelPodTemplateHash is the label a Deployment's ReplicaSet puts on its
// pods.
const labelPodTemplateHash = "pod-template-hash"

// templateHash is a stable stand-in for a ReplicaSet's pod-template-hash.
func templateHash(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // Kubernetes' safe characters
	out := make([]byte, 10)
	for i := range out {
		out[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(out)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
