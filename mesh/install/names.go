package install

import (
	"fmt"

	"github.com/weftmesh/weft/apis/vocab"
)

// Names of the objects the install creates in the control-plane namespace.
// `weft check` looks for exactly these.
const (
	// ConfigMapValues holds the [inject.Values] the injector reads, under
	// [ValuesKey].
	ConfigMapValues = "weft-config"
	ValuesKey       = "values.yaml"

	// ConfigMapTrustRoots holds the trust anchors (PEM bundle) under
	// [TrustRootsKey]; the identity service and the injector mount it.
	ConfigMapTrustRoots = "weft-identity-trust-roots"
	TrustRootsKey       = "ca-bundle.crt"

	// SecretIssuer holds the identity issuer's certificate and key, in the
	// layout chosen with [WithIssuerScheme].
	SecretIssuer = "weft-identity-issuer"

	// SecretInjectorTLS is the injector's HTTPS serving certificate
	// (kubernetes.io/tls, with the CA in ca.crt).
	SecretInjectorTLS = "weft-proxy-injector-tls"

	// ServiceInjector fronts the admission webhooks on port
	// [InjectorServicePort]; the pods listen on [InjectorPort].
	ServiceInjector     = "weft-proxy-injector"
	InjectorServicePort = 443
	InjectorPort        = 8443
	// InjectPath and ValidatePath are the webhook paths the injector serves.
	InjectPath   = "/inject"
	ValidatePath = "/validate"

	// Webhook configuration names (cluster-scoped: one injector per cluster).
	MutatingWebhookConfiguration         = "weft-proxy-injector-webhook-config"
	ServiceProfileValidatorConfiguration = "weft-sp-validator-webhook-config"
	PolicyValidatorConfiguration         = "weft-policy-validator-webhook-config"

	// Names of the webhooks inside those configurations.
	InjectorWebhookName        = "proxy-injector.weftmesh.io"
	ServiceProfileWebhookName  = "sp-validator.weftmesh.io"
	PolicyValidatorWebhookName = "policy-validator.weftmesh.io"

	// IdentityMetricsPort and DestinationMetricsPort serve /metrics, /live
	// and /ready (the controllers' --metrics-addr).
	IdentityMetricsPort    = 9990
	DestinationMetricsPort = 9996

	// ControllerUID is the user the control-plane containers run as (the
	// distroless "nonroot" user of the weft-controller image).
	ControllerUID = 65532

	// DefaultControllerImage is the weft-controller image without its tag;
	// the tag is the Values version.
	DefaultControllerImage = "ghcr.io/weftmesh/weft-controller"
)

// Labels the install puts on its objects.
const (
	// LabelComponent names the control-plane component of a pod and of the
	// objects that belong to it ("identity", "destination", "policy",
	// "proxy-injector"). The Deployments select their pods with it and the
	// mutating webhook never injects a pod carrying it.
	LabelComponent = vocab.LabelControlPlaneComponent
	// LabelIsControlPlane marks the control-plane namespace.
	LabelIsControlPlane = "linkerd.io/is-control-plane"
	LabelPartOf         = "app.kubernetes.io/part-of"
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelVersion        = "app.kubernetes.io/version"
	LabelName           = "app.kubernetes.io/name"
	// AnnotationConfigChecksum on the injector's pods changes when the
	// Values or trust anchors it reads at start-up change, so applying a new
	// install rolls it.
	AnnotationConfigChecksum = "weftmesh.io/config-checksum"
)

// Component is one control-plane component: its Deployment, service
// account and the Service proxies or the API server dial.
type Component struct {
	// Name is the value of [LabelComponent].
	Name string
	// Deployment and ServiceAccount are named alike ("weft-identity").
	Deployment     string
	ServiceAccount string
	// Service is the Service in front of the component and Port its port.
	Service string
	Port    int32
}

// Components lists the control plane, in a fixed order. Policy runs as its
// own Deployment (not as a second container of destination, as in Linkerd)
// so that each service account holds only the permissions its component
// uses.
func Components() []Component {
	return []Component{
		{Name: "identity", Deployment: "weft-identity", ServiceAccount: "weft-identity", Service: vocab.ServiceIdentity, Port: vocab.IdentityPort},
		{Name: "destination", Deployment: "weft-destination", ServiceAccount: "weft-destination", Service: vocab.ServiceDestination, Port: vocab.DestinationPort},
		{Name: "policy", Deployment: "weft-policy", ServiceAccount: "weft-policy", Service: vocab.ServicePolicy, Port: vocab.PolicyPort},
		{Name: "proxy-injector", Deployment: "weft-proxy-injector", ServiceAccount: "weft-proxy-injector", Service: ServiceInjector, Port: InjectorServicePort},
	}
}

// ClusterRoleName is the name of a component's ClusterRole and
// ClusterRoleBinding. It carries the control-plane namespace so that the
// cluster-scoped objects of two installs do not collide.
func ClusterRoleName(namespace, component string) string {
	return fmt.Sprintf("weft-%s-%s", namespace, component)
}

// InjectorServerName is the DNS name the API server checks the injector's
// serving certificate against.
func InjectorServerName(namespace string) string {
	return ServiceInjector + "." + namespace + ".svc"
}
