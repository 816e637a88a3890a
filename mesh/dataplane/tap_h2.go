package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
)

// The server side of gRPC over HTTP/2, for the one method the tap server
// has: io.linkerd.proxy.tap.Tap/Observe, a server-streaming call. It
// answers what grpc-go's server answered, status for status (checked
// against grpc-go 1.85's transport), so that grpc-go clients and
// linkerd's tap clients see no difference; what it writes per message is
// the gRPC framing: a 5-byte prefix (flag 0: not compressed, then the
// length, big-endian) and the message. A batch of events goes out as one
// Write and one Flush (tapStream.sendBatch), where grpc-go's stream paid
// its bookkeeping, its writer's queue and a DATA frame per message.
//
// What it does not do (docs/decisions.md): compression (a compressed
// request is refused as grpc-go refuses one with no decompressor
// registered, and events go out uncompressed, as they did), reflection,
// health, any other method or service.

// tapObservePath is the only method served.
const tapObservePath = "/" + tapServiceName + "/Observe"

// tapServiceName is the one service served, by its full name.
const tapServiceName = "io.linkerd.proxy.tap.Tap"

// tapRequestWait bounds how long a stream may take to send its request.
const tapRequestWait = 10 * time.Second

// tapStatus is a gRPC status to end a stream with.
type tapStatus struct {
	code codes.Code
	msg  string
}

func (s *tapStatus) Error() string { return fmt.Sprintf("dataplane: tap: %v: %s", s.code, s.msg) }

func tapStatusf(c codes.Code, format string, args ...any) *tapStatus {
	return &tapStatus{code: c, msg: fmt.Sprintf(format, args...)}
}

// unknownMethod is the status of a call to another path, in grpc-go's
// words.
func unknownMethod(path string) *tapStatus {
	sm := strings.TrimPrefix(path, "/")
	at := strings.LastIndex(sm, "/")
	if at < 0 {
		return tapStatusf(codes.Unimplemented, "malformed method name: %q", path)
	}
	if service := sm[:at]; service != tapServiceName {
		return tapStatusf(codes.Unimplemented, "unknown service %v", service)
	}
	return tapStatusf(codes.Unimplemented, "unknown method %v for service %v", sm[at+1:], tapServiceName)
}

// isGRPCContentType reports whether a request's content-type is gRPC's:
// application/grpc, alone or with a +subtype or ;parameters.
func isGRPCContentType(ct string) bool {
	const base = "application/grpc"
	if !strings.HasPrefix(ct, base) {
		return false
	}
	rest := ct[len(base):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// parseGRPCTimeout decodes a grpc-timeout header: at most 8 digits and a
// unit (H, M, S, m, u, n).
func parseGRPCTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("dataplane: tap: grpc-timeout %q: want 1 to 8 digits and a unit", v)
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil || v[0] == '+' {
		return 0, fmt.Errorf("dataplane: tap: grpc-timeout %q: want 1 to 8 digits and a unit", v)
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
		return 0, fmt.Errorf("dataplane: tap: grpc-timeout %q: unknown unit", v)
	}
	if d := time.Duration(n) * unit; d/unit == time.Duration(n) {
		return d, nil
	}
	return time.Duration(1<<63 - 1), nil
}

// encodeGRPCMessage percent-encodes a grpc-message value: bytes outside
// printable ASCII, and '%', become %XX.
func encodeGRPCMessage(m string) string {
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

// tapStream is one Observe call's HTTP/2 stream.
type tapStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool   // the response head went out
	buf     []byte // the batch being written, reused
}

// earlyAbort answers before the call started, as grpc-go's transport does
// for a request that is not gRPC: the HTTP status, content-type
// application/grpc and the gRPC status, in one HEADERS frame that ends the
// stream.
func earlyAbort(w http.ResponseWriter, httpStatus int, st *tapStatus) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(st.code)))
	h.Set("Grpc-Message", encodeGRPCMessage(st.msg))
	w.WriteHeader(httpStatus)
}

// start sends the response head: 200, application/grpc.
func (s *tapStream) start() {
	if s.started {
		return
	}
	s.started = true
	s.w.Header().Set("Content-Type", "application/grpc")
	s.w.WriteHeader(http.StatusOK)
}

// finish ends the call with st (nil: OK): in trailers once the head went
// out, otherwise in a trailers-only response.
func (s *tapStream) finish(st *tapStatus) {
	if st == nil {
		st = &tapStatus{code: codes.OK}
	}
	h := s.w.Header()
	if !s.started {
		s.started = true
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", strconv.Itoa(int(st.code)))
		if st.msg != "" {
			h.Set("Grpc-Message", encodeGRPCMessage(st.msg))
		}
		s.w.WriteHeader(http.StatusOK)
		return
	}
	h.Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(int(st.code)))
	if st.msg != "" {
		h.Set(http.TrailerPrefix+"Grpc-Message", encodeGRPCMessage(st.msg))
	}
}

// appendMessage frames one message into the batch.
func (s *tapStream) appendMessage(msg []byte) {
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
	s.buf = append(append(s.buf, prefix[:]...), msg...)
}

// flush writes the framed batch in one Write and one Flush.
func (s *tapStream) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	s.start()
	_, err := s.w.Write(s.buf)
	if err == nil {
		err = s.rc.Flush()
	}
	if cap(s.buf) > 1<<20 {
		s.buf = nil // a rare huge batch is not held for the stream's life
	} else {
		s.buf = s.buf[:0]
	}
	return err
}

// readTapRequest reads the call's one request message, as grpc-go's
// server stream reads the request of a server-streaming call: a message
// of at most tapMaxRequest bytes, not compressed, then the end of the
// request stream.
func readTapRequest(r *http.Request) (*ptap.ObserveRequest, *tapStatus) {
	var prefix [5]byte
	if _, err := io.ReadFull(r.Body, prefix[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, tapStatusf(codes.Internal, "cardinality violation: received no request message from non-client-streaming RPC")
		}
		return nil, readError(err)
	}
	switch prefix[0] {
	case 0:
	case 1:
		if enc := r.Header.Get("Grpc-Encoding"); enc == "" || enc == "identity" {
			return nil, tapStatusf(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		}
		return nil, tapStatusf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", r.Header.Get("Grpc-Encoding"))
	default:
		return nil, tapStatusf(codes.Internal, "grpc: received unexpected payload format %d", prefix[0])
	}
	n := binary.BigEndian.Uint32(prefix[1:])
	if n > tapMaxRequest {
		return nil, tapStatusf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, tapMaxRequest)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r.Body, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, readError(err)
	}
	var one [1]byte
	switch _, err := io.ReadFull(r.Body, one[:]); {
	case err == nil:
		return nil, tapStatusf(codes.Internal, "cardinality violation: received multiple request messages for non-client-streaming RPC")
	case !errors.Is(err, io.EOF):
		return nil, readError(err)
	}
	req := &ptap.ObserveRequest{}
	if err := proto.Unmarshal(msg, req); err != nil {
		return nil, tapStatusf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return req, nil
}

// readError is the status of a request that could not be read.
func readError(err error) *tapStatus {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return tapStatusf(codes.Internal, "%v", io.ErrUnexpectedEOF)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return tapStatusf(codes.DeadlineExceeded, "dataplane: the tap request did not arrive in time")
	}
	return tapStatusf(codes.Canceled, "dataplane: reading the tap request: %v", err)
}
