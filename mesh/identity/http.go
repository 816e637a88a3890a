package identity

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/mesh/internal/grpcwire"
)

// CertifyPath is the HTTP/2 path of the Certify method.
const CertifyPath = pb.Identity_Certify_FullMethodName

// serviceName is the full name of the one service Handler serves.
const serviceName = "io.linkerd.proxy.identity.Identity"

// Handler returns Certify served as an http.Handler that speaks gRPC over
// HTTP/2 on Go's HTTP/2 server, without grpc-go's transport: the same
// wire contract as Register, the same answers status for status
// (grpc-go 1.85's), the same Service.Certify behind it, the same metrics.
// Serve it on an http.Server with HTTP/2 (over TLS, or unencrypted HTTP/2
// with prior knowledge); the caller owns the server and its connection
// limits, as with Register.
//
// The identity controller does not use it: on Go's HTTP/2 server a
// Certify costs the server more CPU than on grpc-go's transport
// (docs/benchmarks.md, "Certify without grpc-go"), so weft-controller
// serves Register. It is for embedders whose port is already a net/http
// HTTP/2 server.
//
// What it trusts of a caller: nothing before the token is checked. The
// request is one message of at most maxRequestBytes bytes (larger:
// RESOURCE_EXHAUSTED, before it is read), not compressed (UNIMPLEMENTED,
// as grpc-go without a decompressor), and must arrive within the request
// timeout (WithRequestTimeout) or the client's grpc-timeout, whichever
// ends first (DEADLINE_EXCEEDED, counted as deadline_exceeded). Any other
// path gets UNIMPLEMENTED, a request that is not gRPC what grpc-go's
// transport answers it.
func (s *Service) Handler(maxRequestBytes int) http.Handler {
	if maxRequestBytes <= 0 || maxRequestBytes > 1<<31 {
		maxRequestBytes = 4 << 20 // grpc-go's default
	}
	return &certifyHTTP{s: s, max: uint32(maxRequestBytes)}
}

type certifyHTTP struct {
	s   *Service
	max uint32
}

// ServeHTTP checks a stream as grpc-go's server does, in its order, then
// runs Certify.
func (h *certifyHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 {
		http.Error(w, "gRPC requires HTTP/2", http.StatusHTTPVersionNotSupported)
		return
	}
	if ct := r.Header.Get("Content-Type"); !grpcwire.IsContentType(ct) {
		grpcwire.EarlyAbort(w, http.StatusUnsupportedMediaType, grpcwire.Errorf(codes.InvalidArgument, "invalid gRPC request content-type %q", ct))
		return
	}
	ctx := r.Context()
	if v := r.Header.Get("Grpc-Timeout"); v != "" {
		d, err := grpcwire.ParseTimeout(v)
		if err != nil {
			grpcwire.EarlyAbort(w, http.StatusBadRequest, grpcwire.Errorf(codes.Internal, "malformed grpc-timeout: %v", err))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if r.Method != http.MethodPost {
		grpcwire.EarlyAbort(w, http.StatusMethodNotAllowed, grpcwire.Errorf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", r.Method))
		return
	}
	resp := grpcwire.NewResponse(w)
	if r.URL.Path != CertifyPath {
		resp.Finish(grpcwire.UnknownMethod(r.URL.Path, serviceName))
		return
	}
	if enc := r.Header.Get("Grpc-Encoding"); enc != "" && enc != "identity" {
		resp.Finish(grpcwire.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", enc))
		return
	}
	resp.Finish(h.certify(ctx, r, w, resp))
}

// certify reads the request under the request timeout, runs Certify and
// writes the answer; it returns the status to end the call with.
func (h *certifyHTTP) certify(ctx context.Context, r *http.Request, w http.ResponseWriter, resp *grpcwire.Response) *grpcwire.Status {
	timeout := h.s.cfg.timeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	// The read deadline bounds the read itself: a client that sends half
	// a message holds nothing past it. Register's path waits on the same
	// deadline with a goroutine per call; here the server's read does.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline)
	msg, err := grpcwire.ReadOne(r, h.max)
	if err != nil {
		st := grpcwire.ReadStatus(err, "", "identity: reading the Certify request")
		if st.Code == codes.DeadlineExceeded || (ctx.Err() != nil && r.Context().Err() == nil) {
			h.s.cfg.metrics.Requests.With("result", "deadline_exceeded").Add(1)
			st = grpcwire.Errorf(codes.DeadlineExceeded, "identity: the Certify request did not arrive within %s", timeout)
		}
		return st
	}
	_ = rc.SetReadDeadline(time.Time{})
	in := new(pb.CertifyRequest)
	if st := grpcwire.Unmarshal(msg, in); st != nil {
		return st
	}
	issued, err := h.s.Certify(ctx, Request{
		Identity: in.GetIdentity(),
		Token:    in.GetToken(),
		CSR:      in.GetCertificateSigningRequest(),
	})
	if err != nil {
		return &grpcwire.Status{Code: Code(err), Message: err.Error()}
	}
	out := IssuedToProto(issued)
	buf := make([]byte, 5, 5+proto.Size(out))
	buf, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, out)
	if err != nil {
		return grpcwire.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	grpcwire.PutPrefix(buf)
	// An error here means the client went away: the status that follows
	// reaches nobody either way.
	_ = resp.Write(buf)
	return nil
}
