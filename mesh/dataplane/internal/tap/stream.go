package tap

import (
	"net/http"
	"time"

	"google.golang.org/grpc/codes"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/internal/grpcwire"
)

// The server side of gRPC over HTTP/2, for the one method the tap server
// has: io.linkerd.proxy.tap.Tap/Observe, a server-streaming call. It
// answers what grpc-go's server answered, status for status (checked
// against grpc-go 1.85's transport), so that grpc-go clients and
// linkerd's tap clients see no difference; what it writes per message is
// the gRPC framing: a 5-byte prefix (flag 0: not compressed, then the
// length, big-endian) and the message. A batch of events goes out as one
// Write and one Flush (grpcStream.flush), where grpc-go's stream paid
// its bookkeeping, its writer's queue and a DATA frame per message.
//
// The framing and the statuses are mesh/internal/grpcwire's, shared with
// the identity service's Certify handler.
//
// What it does not do (docs/decisions.md): compression (a compressed
// request is refused as grpc-go refuses one with no decompressor
// registered, and events go out uncompressed, as they did), reflection,
// health, any other method or service.

// observePath is the only method served.
const observePath = "/" + serviceName + "/Observe"

// serviceName is the one service served, by its full name.
const serviceName = "io.linkerd.proxy.tap.Tap"

// requestWait bounds how long a stream may take to send its request.
const requestWait = 10 * time.Second

// status is a gRPC status to end a stream with.
type status = grpcwire.Status

func statusf(c codes.Code, format string, args ...any) *status {
	return grpcwire.Errorf(c, format, args...)
}

// grpcStream is one Observe call's HTTP/2 stream.
type grpcStream struct {
	resp *grpcwire.Response
	rc   *http.ResponseController
	buf  []byte // the batch being written, reused
}

func newGRPCStream(w http.ResponseWriter) *grpcStream {
	return &grpcStream{resp: grpcwire.NewResponse(w), rc: http.NewResponseController(w)}
}

// finish ends the call with st (nil: OK).
func (s *grpcStream) finish(st *status) { s.resp.Finish(st) }

// appendMessage frames one message into the batch.
func (s *grpcStream) appendMessage(msg []byte) { s.buf = grpcwire.AppendMessage(s.buf, msg) }

// flush writes the framed batch in one Write and one Flush.
func (s *grpcStream) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	err := s.resp.Write(s.buf)
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

// readObserveRequest reads the call's one request message, as grpc-go's
// server stream reads the request of a server-streaming call: a message
// of at most maxRequest bytes, not compressed, then the end of the
// request stream.
func readObserveRequest(r *http.Request) (*ptap.ObserveRequest, *status) {
	msg, err := grpcwire.ReadOne(r, maxRequest)
	if err != nil {
		return nil, grpcwire.ReadStatus(err, "dataplane: the tap request did not arrive in time", "dataplane: reading the tap request")
	}
	req := &ptap.ObserveRequest{}
	if st := grpcwire.Unmarshal(msg, req); st != nil {
		return nil, st
	}
	return req, nil
}
