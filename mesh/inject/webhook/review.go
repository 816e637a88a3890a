package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/go-kit/kit/metrics"
	"github.com/go-kit/kit/metrics/discard"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxBodyBytes is the default limit on an AdmissionReview body (10 MB, as
// in Linkerd); larger requests get 413.
const MaxBodyBytes = 10 << 20

// ErrBadReview is wrapped by [DecodeReview] for every malformed
// AdmissionReview.
var ErrBadReview = errors.New("webhook: bad AdmissionReview")

// DecodeReview parses an AdmissionReview v1 request. It refuses other API
// versions and kinds, a missing request and an empty request.uid. Fields it
// does not know are ignored, so newer API servers keep working.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&review); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON: %v", ErrBadReview, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrBadReview)
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("%w: apiVersion %q is not supported (want %s)", ErrBadReview, review.APIVersion, admissionv1.SchemeGroupVersion)
	}
	if review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("%w: kind %q is not AdmissionReview", ErrBadReview, review.Kind)
	}
	if review.Request == nil {
		return nil, fmt.Errorf("%w: request is missing", ErrBadReview)
	}
	if review.Request.UID == "" {
		return nil, fmt.Errorf("%w: request.uid is empty", ErrBadReview)
	}
	return &review, nil
}

// Option tunes a webhook handler.
type Option func(*options)

type options struct {
	logger   *slog.Logger
	requests metrics.Counter
	duration metrics.Histogram
	now      func() time.Time
	maxBody  int64
}

func defaultOptions() options {
	return options{
		logger:   slog.New(slog.DiscardHandler),
		requests: discard.NewCounter(),
		duration: discard.NewHistogram(),
		now:      time.Now,
		maxBody:  MaxBodyBytes,
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithMetrics sets the request counter and the latency histogram (in
// seconds). Both get the label "outcome" (injected, skipped, allowed,
// denied, bad_request, error). Defaults discard.
func WithMetrics(requests metrics.Counter, duration metrics.Histogram) Option {
	return func(o *options) {
		if requests != nil {
			o.requests = requests
		}
		if duration != nil {
			o.duration = duration
		}
	}
}

// WithClock sets the clock used to measure request latency.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithMaxBodyBytes changes the body limit (default [MaxBodyBytes]).
func WithMaxBodyBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBody = n
		}
	}
}

// httpError is a failure answered with an HTTP status instead of an
// AdmissionReview.
type httpError struct {
	status int
	msg    string
}

// readReview checks method, content type and size, and decodes the review.
func readReview(r *http.Request, maxBody int64) (*admissionv1.AdmissionReview, *httpError) {
	if r.Method != http.MethodPost {
		return nil, &httpError{http.StatusMethodNotAllowed, "webhook: only POST is accepted"}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("webhook: content type %q is not application/json", ct)}
		}
	}
	if r.ContentLength > maxBody {
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("webhook: body of %d bytes exceeds the limit of %d", r.ContentLength, maxBody)}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, "webhook: reading body: " + err.Error()}
	}
	if int64(len(body)) > maxBody {
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("webhook: body exceeds the limit of %d bytes", maxBody)}
	}
	review, err := DecodeReview(body)
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, err.Error()}
	}
	return review, nil
}

// writeResponse answers with an AdmissionReview v1 carrying resp.
func writeResponse(w http.ResponseWriter, resp *admissionv1.AdmissionResponse) error {
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	}
	b, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(b)
	return err
}

func writeHTTPError(w http.ResponseWriter, e *httpError) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	_, _ = io.WriteString(w, e.msg+"\n")
}

// deny builds a refusal with an HTTP-like code and a message.
func deny(uid string, code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		UID:     typesUID(uid),
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg},
	}
}

// guard turns a panic in a handler into a 500, so one bad request cannot
// take the webhook down; it is defence in depth, not control flow.
func guard(w http.ResponseWriter, logger *slog.Logger, record func(string)) {
	if v := recover(); v != nil {
		logger.Error("webhook: handler panicked", "panic", fmt.Sprint(v))
		record("error")
		writeHTTPError(w, &httpError{http.StatusInternalServerError, "webhook: internal error"})
	}
}
