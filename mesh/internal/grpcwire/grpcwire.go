package grpcwire

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// ContentType is the content-type of every response.
const ContentType = "application/grpc"

// Status is a gRPC status to end a call with.
type Status struct {
	Code    codes.Code
	Message string
}

func (s *Status) Error() string { return fmt.Sprintf("grpcwire: %v: %s", s.Code, s.Message) }

// Errorf returns a status with a formatted message.
func Errorf(c codes.Code, format string, args ...any) *Status {
	return &Status{Code: c, Message: fmt.Sprintf(format, args...)}
}

// UnknownMethod is the status grpc-go gives a call to path on a server
// whose only service is service: a malformed name, an unknown service, or
// an unknown method of service.
func UnknownMethod(path, service string) *Status {
	sm := strings.TrimPrefix(path, "/")
	at := strings.LastIndex(sm, "/")
	if at < 0 {
		return Errorf(codes.Unimplemented, "malformed method name: %q", path)
	}
	if s := sm[:at]; s != service {
		return Errorf(codes.Unimplemented, "unknown service %v", s)
	}
	return Errorf(codes.Unimplemented, "unknown method %v for service %v", sm[at+1:], service)
}

// IsContentType reports whether a request's content-type is gRPC's:
// application/grpc, alone or with a +subtype or ;parameters.
func IsContentType(ct string) bool {
	if !strings.HasPrefix(ct, ContentType) {
		return false
	}
	rest := ct[len(ContentType):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// ParseTimeout decodes a grpc-timeout header: 1 to 8 digits and a unit
// (H, M, S, m, u, n). A value too large for a time.Duration is the
// largest one.
func ParseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("grpcwire: grpc-timeout %q: want 1 to 8 digits and a unit", v)
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil || v[0] == '+' {
		return 0, fmt.Errorf("grpcwire: grpc-timeout %q: want 1 to 8 digits and a unit", v)
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("grpcwire: grpc-timeout %q: unknown unit", v)
	}
	if d := time.Duration(n) * unit; d/unit == time.Duration(n) {
		return d, nil
	}
	return time.Duration(1<<63 - 1), nil
}

// EncodeMessage percent-encodes a grpc-message value: bytes outside
// printable ASCII, and '%', become %XX.
func EncodeMessage(m string) string {
	clean := true
	for i := 0; i < len(m) && clean; i++ {
		clean = m[i] >= ' ' && m[i] <= '~' && m[i] != '%'
	}
	if clean {
		return m
	}
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// EarlyAbort answers before the call started, as grpc-go's transport does
// for a request that is not gRPC: the HTTP status, content-type
// application/grpc and the gRPC status, in one HEADERS frame that ends the
// stream.
func EarlyAbort(w http.ResponseWriter, httpStatus int, st *Status) {
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Grpc-Status", strconv.Itoa(int(st.Code)))
	h.Set("Grpc-Message", EncodeMessage(st.Message))
	w.WriteHeader(httpStatus)
}

// AppendMessage appends msg to buf with its 5-byte prefix (not
// compressed, the length big-endian).
func AppendMessage(buf, msg []byte) []byte {
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
	return append(append(buf, prefix[:]...), msg...)
}

// PutPrefix writes the 5-byte prefix of the message that follows it into
// buf[:5] (buf holds the prefix's room, then the message): for a message
// marshalled straight after room left for its prefix.
func PutPrefix(buf []byte) {
	buf[0] = 0
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(buf)-5))
}

// Response is the answer of one call: a head (200, application/grpc), the
// messages, and the status in trailers; or, when the call ends before any
// message, the status alone in a trailers-only response.
type Response struct {
	w       http.ResponseWriter
	started bool // the response head went out
}

// NewResponse returns the answer written to w.
func NewResponse(w http.ResponseWriter) *Response { return &Response{w: w} }

// Start sends the response head, once.
func (r *Response) Start() {
	if r.started {
		return
	}
	r.started = true
	r.w.Header().Set("Content-Type", ContentType)
	r.w.WriteHeader(http.StatusOK)
}

// Write sends framed messages (AppendMessage), after the head.
func (r *Response) Write(framed []byte) error {
	r.Start()
	_, err := r.w.Write(framed)
	return err
}

// Finish ends the call with st (nil: OK): in trailers once the head went
// out, otherwise in a trailers-only response.
func (r *Response) Finish(st *Status) {
	code, msg := codes.OK, ""
	if st != nil {
		code, msg = st.Code, st.Message
	}
	h := r.w.Header()
	prefix := http.TrailerPrefix
	if !r.started {
		r.started = true
		h.Set("Content-Type", ContentType)
		prefix = ""
	}
	h.Set(prefix+"Grpc-Status", strconv.Itoa(int(code)))
	if msg != "" {
		h.Set(prefix+"Grpc-Message", EncodeMessage(msg))
	}
	if prefix == "" {
		r.w.WriteHeader(http.StatusOK)
	}
}
