package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/weftmesh/weft/apis/manifest"
)

// Validator is the validating admission webhook for ServiceProfiles,
// policy.linkerd.io resources and the Gateway API routes Weft reads. It
// decodes the object strictly (an unknown or mistyped field is a rejection
// naming the field) and then runs [Validate]. Rejections list every invalid
// field, in the message and as status causes. Deletions and kinds it does
// not know are allowed. HTTP-level failures are answered as by [Injector]
// (413 over [MaxValidateBodyBytes] by default, 429 when its Limiter is
// full).
type Validator struct {
	opts options
}

// NewValidator builds the validating webhook.
func NewValidator(opts ...Option) (*Validator, error) {
	return &Validator{opts: newOptions(MaxValidateBodyBytes, opts)}, nil
}

// ServeHTTP handles one AdmissionReview.
func (v *Validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := v.opts.now()
	outcome := "error"
	record := func(o string) { outcome = o }
	defer func() {
		v.opts.metrics.Requests.With("outcome", outcome).Add(1)
		v.opts.metrics.Duration.With("outcome", outcome).Observe(v.opts.now().Sub(start).Seconds())
	}()
	defer guard(w, v.opts.logger, record)

	req, release, herr := readRequest[manifestObject](w, r, v.opts, record)
	if herr != nil {
		writeHTTPError(w, herr)
		return
	}
	defer release()
	resp, o := v.admit(req)
	record(o)
	if err := writeResponse(w, resp, v.opts.out); err != nil {
		v.opts.logger.Warn("webhook: writing response", "error", err)
	}
}

func (v *Validator) admit(req *request[manifestObject]) (*admissionv1.AdmissionResponse, string) {
	allow := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation == admissionv1.Delete || req.Operation == admissionv1.Connect || req.SubResource != "" || !validated(req.Kind) {
		return allow, "allowed"
	}
	objects, err := req.Object.objects, req.Object.err
	if !req.Object.present {
		err = errors.New("request.object is missing")
	}
	if err != nil {
		var causes []metav1.StatusCause
		var msgs []string
		for _, e := range flatten(err) {
			var me *manifest.Error
			if errors.As(e, &me) {
				causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: me.Field, Message: me.Err.Error()})
				if me.Field != "" {
					msgs = append(msgs, fmt.Sprintf("%s: %v", me.Field, me.Err))
					continue
				}
				msgs = append(msgs, me.Err.Error())
				continue
			}
			msgs = append(msgs, e.Error())
		}
		resp := deny(string(req.UID), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, qualify(req.Namespace, req.Name), strings.Join(msgs, "; ")))
		resp.Result.Details = &metav1.StatusDetails{Name: req.Name, Group: req.Kind.Group, Kind: req.Kind.Kind, Causes: causes}
		v.opts.logger.Info("webhook: object rejected", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "error", resp.Result.Message)
		return resp, "denied"
	}
	if len(objects) != 1 {
		resp := deny(string(req.UID), http.StatusBadRequest, metav1.StatusReasonBadRequest, "webhook: request.object must hold exactly one object")
		return resp, "bad_request"
	}
	errs := Validate(objects[0].Object)
	if len(errs) == 0 {
		return allow, "allowed"
	}
	resp := deny(string(req.UID), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, qualify(req.Namespace, req.Name), joinFieldErrors(errs)))
	resp.Result.Details = &metav1.StatusDetails{Name: req.Name, Group: req.Kind.Group, Kind: req.Kind.Kind}
	for _, e := range errs {
		resp.Result.Details.Causes = append(resp.Result.Details.Causes, metav1.StatusCause{
			Type: metav1.CauseType(e.Type), Field: e.Field, Message: e.ErrorBody(),
		})
	}
	v.opts.logger.Info("webhook: object rejected", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "error", resp.Result.Message)
	return resp, "denied"
}

func qualify(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func joinFieldErrors(errs field.ErrorList) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// flatten unwraps errors.Join trees into their leaves.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// validated reports whether the validator checks objects of this kind.
func validated(k metav1.GroupVersionKind) bool {
	switch k.Group + "/" + k.Version + "/" + k.Kind {
	case "linkerd.io/v1alpha2/ServiceProfile",
		"policy.linkerd.io/v1beta1/Server", "policy.linkerd.io/v1beta2/Server", "policy.linkerd.io/v1beta3/Server",
		"policy.linkerd.io/v1beta1/ServerAuthorization", "policy.linkerd.io/v1beta3/HTTPRoute",
		"policy.linkerd.io/v1alpha1/AuthorizationPolicy", "policy.linkerd.io/v1alpha1/MeshTLSAuthentication",
		"policy.linkerd.io/v1alpha1/NetworkAuthentication", "policy.linkerd.io/v1alpha1/HTTPLocalRateLimitPolicy",
		"policy.linkerd.io/v1alpha1/EgressNetwork",
		"gateway.networking.k8s.io/v1/HTTPRoute", "gateway.networking.k8s.io/v1/GRPCRoute",
		"gateway.networking.k8s.io/v1/TCPRoute", "gateway.networking.k8s.io/v1alpha2/TCPRoute",
		"gateway.networking.k8s.io/v1/TLSRoute", "gateway.networking.k8s.io/v1alpha2/TLSRoute":
		return true
	}
	return false
}
