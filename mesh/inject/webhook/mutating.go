package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	"github.com/weftmesh/weft/mesh/inject"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func typesUID(s string) types.UID { return types.UID(s) }

// Injector is the mutating admission webhook that adds the proxy to pods.
// It is an http.Handler; the caller serves it over TLS.
//
// Answers:
//   - 405, 415, 413 (body over the limit) and 400 (malformed JSON, wrong
//     apiVersion or kind, missing request or request.uid) as plain HTTP
//     errors;
//   - 429 with Retry-After when its Limiter is full, before reading the
//     body;
//   - 500 when the namespace cannot be read, so the webhook's
//     failurePolicy decides;
//   - otherwise an AdmissionReview: non-Pod kinds, operations other than
//     CREATE and subresources are allowed unchanged; pods are allowed with
//     the JSON Patch from [inject.Render] (possibly empty, with the reason
//     in the audit annotations); a pod whose annotations are invalid is
//     denied with a message naming the annotation and value.
type Injector struct {
	values     inject.Values
	namespaces inject.NamespaceLookup
	opts       options
}

// NewInjector builds the injector. values must be valid and carry the trust
// anchors (a proxy without them could never become ready).
func NewInjector(values inject.Values, namespaces inject.NamespaceLookup, opts ...Option) (*Injector, error) {
	if namespaces == nil {
		return nil, errors.New("webhook: no namespace lookup")
	}
	if err := values.Validate(); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if values.IdentityTrustAnchorsPEM == "" {
		return nil, errors.New("webhook: values.identityTrustAnchorsPEM is empty")
	}
	return &Injector{values: values, namespaces: namespaces, opts: newOptions(MaxBodyBytes, opts)}, nil
}

// ServeHTTP handles one AdmissionReview.
func (h *Injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.opts.now()
	outcome := "error"
	record := func(o string) { outcome = o }
	defer func() {
		h.opts.metrics.Requests.With("outcome", outcome).Add(1)
		h.opts.metrics.Duration.With("outcome", outcome).Observe(h.opts.now().Sub(start).Seconds())
	}()
	defer guard(w, h.opts.logger, record)

	req, release, herr := readRequest[podObject](w, r, h.opts, record)
	if herr != nil {
		h.opts.logger.Debug("webhook: refused request", "status", herr.status, "error", herr.msg)
		writeHTTPError(w, herr)
		return
	}
	defer release()
	// The patch is encoded into a recycled buffer, given back once the
	// answer that carries it is written.
	patchBuf := h.opts.out.get()
	defer h.opts.out.put(patchBuf)
	resp, o, herr := h.admit(r, req, patchBuf)
	record(o)
	if herr != nil {
		h.opts.logger.Warn("webhook: cannot admit pod", "uid", req.UID, "error", herr.msg)
		writeHTTPError(w, herr)
		return
	}
	if err := writeResponse(w, resp, h.opts.out); err != nil {
		h.opts.logger.Warn("webhook: writing response", "error", err)
	}
}

// admit decides on one request; it returns the response and the outcome
// label, or an HTTP error. A patch in the response is encoded into
// patchBuf.
func (h *Injector) admit(r *http.Request, req *request[podObject], patchBuf *bytes.Buffer) (*admissionv1.AdmissionResponse, string, *httpError) {
	uid := string(req.UID)
	allow := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	isPod := req.Kind.Group == "" && req.Kind.Version == "v1" && req.Kind.Kind == "Pod"
	if !isPod || req.Operation != admissionv1.Create || req.SubResource != "" {
		return allow, "allowed", nil
	}
	if req.Object.err != nil || req.Object.pod == nil {
		why := "it is missing"
		if req.Object.err != nil {
			why = req.Object.err.Error()
		}
		return deny(uid, http.StatusBadRequest, metav1.StatusReasonBadRequest, "webhook: request.object is not a Pod: "+why), "bad_request", nil
	}
	pod := req.Object.pod
	nsName := req.Namespace
	if nsName == "" {
		nsName = pod.Namespace
	}
	if pod.Namespace == "" {
		pod.Namespace = nsName
	}
	var ns *corev1.Namespace
	if nsName != "" {
		var err error
		ns, err = h.namespaces.Namespace(r.Context(), nsName)
		switch {
		case errors.Is(err, inject.ErrNamespaceNotFound):
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
		case err != nil:
			return nil, "error", &httpError{status: http.StatusInternalServerError, msg: fmt.Sprintf("webhook: reading namespace %q: %v", nsName, err)}
		}
	}

	patch, report, err := inject.Render(pod, ns, h.values)
	if err != nil {
		h.opts.logger.Info("webhook: pod denied", "namespace", nsName, "pod", report.Name, "error", err)
		return deny(uid, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error()), "denied", nil
	}
	resp := allow
	resp.Warnings = limitWarnings(report.Warnings)
	resp.AuditAnnotations = map[string]string{"injected": fmt.Sprint(report.Injected)}
	if !report.Injected {
		resp.AuditAnnotations["reason"] = string(report.Reason)
		h.opts.logger.Debug("webhook: pod not injected", "namespace", nsName, "pod", report.Name, "reason", report.Reason, "message", report.Message)
		return resp, "skipped", nil
	}
	body, err := encodeJSON(patchBuf, patch)
	if err != nil {
		return nil, "error", &httpError{status: http.StatusInternalServerError, msg: "webhook: encoding patch: " + err.Error()}
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.PatchType = &pt
	resp.Patch = body
	h.opts.logger.Info("webhook: pod injected", "namespace", nsName, "pod", report.Name,
		"sidecar", report.Sidecar, "mode", report.Mode, "dryRun", req.DryRun != nil && *req.DryRun)
	return resp, "injected", nil
}

// limitWarnings keeps warnings within what API servers show.
func limitWarnings(ws []string) []string {
	const maxWarnings, maxLen = 10, 256
	var out []string
	for i, w := range ws {
		if i == maxWarnings {
			break
		}
		if len(w) > maxLen {
			w = w[:maxLen-3] + "..."
		}
		out = append(out, w)
	}
	return out
}
