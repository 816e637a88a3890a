package kubernetes

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

// Tap in a cluster goes through the tap API (package tapapi), which the
// control plane's tap component serves behind the API server: the API
// server authenticates the caller, the tap component asks it whether the
// caller may watch RESOURCE/tap in the namespace, and taps the proxies
// with the one identity they accept.

// WithTapREST sets the REST client taps are sent with (default: the
// client's discovery REST client). A tap streams for as long as it runs:
// give a client without an overall request timeout.
func WithTapREST(c rest.Interface) Option { return func(s *Source) { s.tapREST = c } }

func (s *Source) rest() rest.Interface {
	if s.tapREST != nil {
		return s.tapREST
	}
	return s.client.Discovery().RESTClient()
}

// Tap taps one pod's proxy through the tap API.
func (s *Source) Tap(ctx context.Context, t viz.Target, req viz.TapRequest) (viz.EventStream, error) {
	return s.TapResource(ctx, viz.Resource{Kind: viz.KindPod, Namespace: t.Namespace, Name: t.Pod}, req, nil)
}

// TapResource taps every meshed pod of r through the tap API, in one
// request that the API server and the tap component authorize for r.
// warn, when not nil, receives the server's warnings (pods it could not
// tap). The stream's Dropped method reports the events the server
// dropped.
func (s *Source) TapResource(ctx context.Context, r viz.Resource, req viz.TapRequest, warn func(string)) (viz.EventStream, error) {
	t, err := tapapi.TargetOf(r)
	if err != nil {
		return nil, err
	}
	c := s.rest()
	if c == nil {
		return nil, errors.New("viz/kubernetes: this client cannot reach the tap API")
	}
	body, err := json.Marshal(tapapi.RequestOf(req))
	if err != nil {
		return nil, err
	}
	rc, err := c.Post().AbsPath(t.Path()).SetHeader("Content-Type", "application/json").Body(body).Stream(ctx)
	if err != nil {
		return nil, tapError(t, err)
	}
	return tapapi.NewReader(rc, warn), nil
}

// tapError explains the API server's answers a user meets first.
func tapError(t tapapi.Target, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "tapapi:"):
		// the tap component's own answer (no pods, bad request)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("viz/kubernetes: tap %s: the cluster serves no tap API (APIService %s): is the control plane installed with its tap component? (%w)", t, tapapi.APIServiceName, err)
	case apierrors.IsServiceUnavailable(err):
		return fmt.Errorf("viz/kubernetes: tap %s: the tap component is not available (APIService %s): %w", t, tapapi.APIServiceName, err)
	}
	return fmt.Errorf("viz/kubernetes: tap %s: %w", t, err)
}

// Lister lists a namespace's meshed pods for the tap component (a
// tapapi.TargetLister).
func Lister(client kubernetes.Interface, opts ...Option) tapapi.TargetLister {
	return func(ctx context.Context, namespace string) ([]viz.Target, error) {
		return New(client, append(append([]Option(nil), opts...), WithNamespace(namespace))...).Targets(ctx)
	}
}

// SubjectAccessReviews authorizes taps by asking the API server (a
// SubjectAccessReview) whether the user may watch RESOURCE/tap in
// tap.weftmesh.io. The tap component's service account needs to create
// SubjectAccessReviews (ClusterRole system:auth-delegator).
type SubjectAccessReviews struct {
	Client kubernetes.Interface
}

// Authorize asks the API server.
func (a SubjectAccessReviews) Authorize(ctx context.Context, at tapapi.Attributes) (bool, string, error) {
	var extra map[string]authzv1.ExtraValue
	for k, v := range at.User.Extra {
		if extra == nil {
			extra = map[string]authzv1.ExtraValue{}
		}
		extra[k] = v
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: at.User.Name, Groups: at.User.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: at.Namespace, Verb: tapapi.Verb, Group: tapapi.Group, Version: tapapi.Version,
			Resource: at.Resource, Subresource: tapapi.Subresource, Name: at.Name,
		},
	}}
	res, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("viz/kubernetes: SubjectAccessReview: %w", err)
	}
	reason := res.Status.Reason
	if reason == "" {
		reason = res.Status.EvaluationError
	}
	return res.Status.Allowed && !res.Status.Denied, reason, nil
}

// The ConfigMap in which the API server publishes how extension API
// servers authenticate it, and its keys.
const (
	AuthenticationConfigMapNamespace = "kube-system"
	AuthenticationConfigMap          = "extension-apiserver-authentication"
	keyRequestHeaderCA               = "requestheader-client-ca-file"
	keyAllowedNames                  = "requestheader-allowed-names"
	keyUsernameHeaders               = "requestheader-username-headers"
	keyGroupHeaders                  = "requestheader-group-headers"
	keyExtraPrefixes                 = "requestheader-extra-headers-prefix"
)

// LoadRequestHeader reads the API server's front-proxy settings from
// kube-system/extension-apiserver-authentication (readable with the Role
// extension-apiserver-authentication-reader there).
func LoadRequestHeader(ctx context.Context, client kubernetes.Interface) (*tapapi.RequestHeader, error) {
	cm, err := client.CoreV1().ConfigMaps(AuthenticationConfigMapNamespace).Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("viz/kubernetes: reading %s/%s: %w", AuthenticationConfigMapNamespace, AuthenticationConfigMap, err)
	}
	return RequestHeaderFrom(cm.Data)
}

// RequestHeaderFrom reads the ConfigMap's data. A missing client CA is an
// error: the API server then runs without aggregation's front proxy, and
// no request could be trusted.
func RequestHeaderFrom(data map[string]string) (*tapapi.RequestHeader, error) {
	where := AuthenticationConfigMapNamespace + "/" + AuthenticationConfigMap
	caPEM := data[keyRequestHeaderCA]
	if strings.TrimSpace(caPEM) == "" {
		return nil, fmt.Errorf("viz/kubernetes: %s has no %s: the API server runs without --requestheader-client-ca-file, so it cannot call aggregated APIs", where, keyRequestHeaderCA)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, fmt.Errorf("viz/kubernetes: %s: %s holds no PEM certificate", where, keyRequestHeaderCA)
	}
	h := &tapapi.RequestHeader{ClientCAs: pool}
	for _, f := range []struct {
		key  string
		dst  *[]string
		need bool
	}{
		{keyAllowedNames, &h.AllowedNames, false},
		{keyUsernameHeaders, &h.UsernameHeaders, true},
		{keyGroupHeaders, &h.GroupHeaders, false},
		{keyExtraPrefixes, &h.ExtraHeaderPrefixes, false},
	} {
		v := strings.TrimSpace(data[f.key])
		if v != "" {
			if err := json.Unmarshal([]byte(v), f.dst); err != nil {
				return nil, fmt.Errorf("viz/kubernetes: %s: %s: want a JSON list of strings: %w", where, f.key, err)
			}
		}
		if f.need && len(*f.dst) == 0 {
			return nil, fmt.Errorf("viz/kubernetes: %s: %s is empty: no header would name the user", where, f.key)
		}
	}
	return h, nil
}
