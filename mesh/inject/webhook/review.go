package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

// Default limits of the handlers; docs/limits.md gives the reasoning.
const (
	// MaxBodyBytes is the injector's default limit on an AdmissionReview
	// body (4 MiB); larger requests get 413. The API server refuses write
	// requests over 3 MiB, so a pod it asks about is at most that much
	// JSON, re-encoded with its defaults and wrapped in an envelope of a
	// few KiB; 4 MiB leaves a MiB of room for both.
	MaxBodyBytes = 4 << 20
	// MaxValidateBodyBytes is the validator's default body limit (1 MiB).
	// The Linkerd and Gateway API objects it validates are a few KiB in
	// practice, while checking one holds up to about 15 times its size
	// (docs/benchmarks.md); 1 MiB keeps a review under about 15 MiB. An
	// UPDATE review carries the object twice (object and oldObject).
	MaxValidateBodyBytes = 1 << 20
	// DefaultMaxInFlight is how many reviews a Limiter admits at once.
	DefaultMaxInFlight = 8
)

// ErrBadReview is wrapped by [DecodeReview] for every malformed
// AdmissionReview.
var ErrBadReview = errors.New("webhook: bad AdmissionReview")

// DecodeReview parses an AdmissionReview v1 request. It refuses other API
// versions and kinds, a missing request and an empty request.uid. Fields it
// does not know are ignored, so newer API servers keep working. The
// handlers decode with the same rules without keeping a copy of the
// object (see decodeRequest).
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, malformed(err)
	}
	var uid types.UID
	if review.Request != nil {
		uid = review.Request.UID
	}
	if err := checkEnvelope(review.APIVersion, review.Kind, review.Request != nil, uid); err != nil {
		return nil, err
	}
	return &review, nil
}

func malformed(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) && strings.Contains(syn.Error(), "after top-level value") {
		return fmt.Errorf("%w: trailing data after the JSON object", ErrBadReview)
	}
	return fmt.Errorf("%w: malformed JSON: %v", ErrBadReview, err)
}

// checkEnvelope checks what every AdmissionReview must carry.
func checkEnvelope(apiVersion, kind string, hasRequest bool, uid types.UID) error {
	switch {
	case apiVersion != admissionv1.SchemeGroupVersion.String():
		return fmt.Errorf("%w: apiVersion %q is not supported (want %s)", ErrBadReview, apiVersion, admissionv1.SchemeGroupVersion)
	case kind != "AdmissionReview":
		return fmt.Errorf("%w: kind %q is not AdmissionReview", ErrBadReview, kind)
	case !hasRequest:
		return fmt.Errorf("%w: request is missing", ErrBadReview)
	case uid == "":
		return fmt.Errorf("%w: request.uid is empty", ErrBadReview)
	}
	return nil
}

// request is the part of an AdmissionRequest the handlers use. Its object
// is decoded while the review is parsed (O is podObject or
// manifestObject), so that no copy of the object's JSON is kept: a review
// holds its body and the decoded object while it is parsed, and only the
// decoded object after that.
type request[O any] struct {
	UID         types.UID               `json:"uid"`
	Kind        metav1.GroupVersionKind `json:"kind"`
	SubResource string                  `json:"subResource,omitempty"`
	Name        string                  `json:"name,omitempty"`
	Namespace   string                  `json:"namespace,omitempty"`
	Operation   admissionv1.Operation   `json:"operation"`
	DryRun      *bool                   `json:"dryRun,omitempty"`
	Object      O                       `json:"object"`
}

func isNull(data []byte) bool { return bytes.Equal(bytes.TrimSpace(data), []byte("null")) }

// podObject is request.object decoded as a Pod. A failure to decode it
// does not fail the review (the handler still needs the uid to answer);
// it is kept in err.
type podObject struct {
	pod *corev1.Pod
	err error
}

// UnmarshalJSON decodes data at once and keeps only the result, as the
// json.Unmarshaler contract asks.
func (o *podObject) UnmarshalJSON(data []byte) error {
	*o = podObject{}
	if isNull(data) {
		return nil
	}
	var pod corev1.Pod
	if o.err = json.Unmarshal(data, &pod); o.err == nil {
		o.pod = &pod
	}
	return nil
}

// manifestObject is request.object decoded strictly by apis/manifest.
type manifestObject struct {
	present bool
	objects []manifest.Object
	err     error
}

// UnmarshalJSON decodes data at once and keeps only the result.
func (o *manifestObject) UnmarshalJSON(data []byte) error {
	*o = manifestObject{}
	if isNull(data) {
		return nil
	}
	o.present = true
	o.objects, o.err = manifest.Decode("request.object", data)
	return nil
}

// decodeRequest parses an AdmissionReview body like DecodeReview, decoding
// request.object into T while it parses.
func decodeRequest[T any](body []byte) (*request[T], error) {
	var review struct {
		APIVersion string      `json:"apiVersion"`
		Kind       string      `json:"kind"`
		Request    *request[T] `json:"request"`
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, malformed(err)
	}
	var uid types.UID
	if review.Request != nil {
		uid = review.Request.UID
	}
	if err := checkEnvelope(review.APIVersion, review.Kind, review.Request != nil, uid); err != nil {
		return nil, err
	}
	return review.Request, nil
}

// Option tunes a webhook handler.
type Option func(*options)

type options struct {
	logger  *slog.Logger
	metrics Metrics
	now     func() time.Time
	maxBody int64
	limiter *Limiter
	out     *responseBuffers
}

// newOptions applies opts over the defaults; maxBody is the handler's
// default body limit.
func newOptions(maxBody int64, opts []Option) options {
	o := options{
		logger:  slog.New(slog.DiscardHandler),
		metrics: DiscardMetrics(),
		now:     time.Now,
		maxBody: maxBody,
		out:     new(responseBuffers),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.limiter == nil {
		o.limiter, _ = NewLimiter(DefaultMaxInFlight)
	}
	return o
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithMetrics sets the instruments the handler reports to (default:
// DiscardMetrics); nil fields record nothing.
func WithMetrics(m Metrics) Option {
	return func(o *options) { o.metrics = kitmetrics.Defaults(m) }
}

// WithClock sets the clock used to measure request latency.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithMaxBodyBytes changes the body limit (default [MaxBodyBytes] for the
// injector, [MaxValidateBodyBytes] for the validator).
func WithMaxBodyBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBody = n
		}
	}
}

// writeResponse answers with an AdmissionReview v1 carrying resp, encoded
// into a recycled buffer and sent with its Content-Length (one write, no
// chunked framing). The body is what json.Marshal gives.
func writeResponse(w http.ResponseWriter, resp *admissionv1.AdmissionResponse, bufs *responseBuffers) error {
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	}
	buf := bufs.get()
	defer bufs.put(buf)
	b, err := encodeJSON(buf, &out)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, err = w.Write(b)
	return err
}

// encodeJSON encodes v into buf and returns the bytes json.Marshal would
// give (Encode adds a newline, Marshal does not); they live in buf.
func encodeJSON(buf *bytes.Buffer, v any) ([]byte, error) {
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// maxPooledResponse is the largest buffer kept for reuse: a typical
// injection answer (a few KiB of patch, base64) fits many times over, and
// a buffer grown by a rare huge answer is left to the collector rather
// than held for good.
const maxPooledResponse = 64 << 10

// responseBuffers recycles the buffers answers are encoded into, so that
// a review does not allocate its response twice (the encoding and its
// copy).
type responseBuffers struct{ pool sync.Pool }

func (p *responseBuffers) get() *bytes.Buffer {
	if b, ok := p.pool.Get().(*bytes.Buffer); ok {
		return b
	}
	return new(bytes.Buffer)
}

func (p *responseBuffers) put(b *bytes.Buffer) {
	if b.Cap() > maxPooledResponse {
		return
	}
	b.Reset()
	p.pool.Put(b)
}

func writeHTTPError(w http.ResponseWriter, e *httpError) {
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if e.closeHTTP1 {
		// Over HTTP/1, Go's server reads what is left of an unread body
		// before it answers, unless the connection is to be closed: a
		// refused review must not wait for a body it will not use.
		w.Header().Set("Connection", "close")
	}
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
		writeHTTPError(w, &httpError{status: http.StatusInternalServerError, msg: "webhook: internal error"})
	}
}
