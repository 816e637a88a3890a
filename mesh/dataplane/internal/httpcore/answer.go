package httpcore

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"
)

// IsGRPC reports whether a request is a gRPC call.
func IsGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return r.ProtoMajor == 2 && strings.HasPrefix(ct, "application/grpc")
}

// The gRPC status codes the proxy answers with.
const (
	GRPCInternal         = 13
	GRPCUnavailable      = 14
	GRPCDeadlineExceeded = 4
	GRPCPermissionDenied = 7
	GRPCUnimplemented    = 12
	GRPCInvalidArgument  = 3
	// GRPCResourceExhausted is the gRPC status of a rate-limited call.
	GRPCResourceExhausted = 8
)

// Answer is a response the proxy makes itself.
type Answer struct {
	Status int    // HTTP status
	GRPC   int    // gRPC status for gRPC calls
	Class  string // reason class (metric label, header)
	Msg    string
}

func (e *Answer) Error() string { return e.Class + ": " + e.Msg }

// WriteAnswer answers a request with e: an HTTP status with a short
// text body, or for a gRPC call a trailers-only response with grpc-status
// and grpc-message. The l5d-proxy-error header names the class and
// message; deny is set for authorization denials (weft-deny-reason).
func WriteAnswer(w http.ResponseWriter, grpc bool, e *Answer, deny bool) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set(HeaderProxyError, e.Class+": "+sanitizeValue(e.Msg))
	if deny {
		h.Set(HeaderDenyReason, e.Class)
	}
	if grpc {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", strconv.Itoa(e.GRPC))
		h.Set("Grpc-Message", GRPCEncode(e.Msg))
		w.WriteHeader(http.StatusOK)
		return
	}
	body := http.StatusText(e.Status) + ": " + e.Msg + "\n"
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = io.WriteString(w, body)
}

// GRPCAnswerFields are the header fields of WriteAnswer's answer to a
// gRPC call (status 200, trailers-only), for a relay that writes header
// fields instead of an http.ResponseWriter: the same fields and values,
// names in lower case.
func GRPCAnswerFields(e *Answer, deny bool) []hpack.HeaderField {
	f := make([]hpack.HeaderField, 0, 5)
	f = append(f, hpack.HeaderField{Name: "l5d-proxy-error", Value: e.Class + ": " + sanitizeValue(e.Msg)})
	if deny {
		f = append(f, hpack.HeaderField{Name: "weft-deny-reason", Value: e.Class})
	}
	return append(f,
		hpack.HeaderField{Name: "content-type", Value: "application/grpc"},
		hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(e.GRPC)},
		hpack.HeaderField{Name: "grpc-message", Value: GRPCEncode(e.Msg)})
}

func sanitizeValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// GRPCEncode percent-encodes a grpc-message as the gRPC spec asks.
func GRPCEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && i < 512; i++ {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// GRPCStatusOf is the grpc-status of an answer the proxy made itself
// (empty when the call is not gRPC).
func GRPCStatusOf(grpc bool, e *Answer) string {
	if !grpc {
		return ""
	}
	return strconv.Itoa(e.GRPC)
}
