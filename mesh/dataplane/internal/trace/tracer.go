package trace

import (
	"net/http"
	"strconv"
)

// Kind is the side of the exchange the proxy's span stands for.
type Kind uint8

// Kinds.
const (
	// Server is the inbound proxy's span: it serves the request for the
	// application behind it.
	Server Kind = iota + 1
	// Client is the outbound proxy's span: it sends the application's
	// request on.
	Client
)

func (k Kind) String() string {
	if k == Server {
		return "server"
	}
	return "client"
}

// Tracer records the proxy's spans. The proxy holds a nil Tracer when
// tracing is off and then calls nothing here.
type Tracer interface {
	// Start begins the proxy's span for r, a child of parent, and
	// returns it; the span's ID is what the next hop must see as its
	// parent. It is called only for a request that carries a context, and
	// records (exports) the span only when parent is sampled.
	Start(parent Context, kind Kind, r *http.Request) Span
}

// Span is one span the proxy started.
type Span interface {
	// ID is the span's own id.
	ID() SpanID
	// End ends the span with how the exchange ended: the HTTP status sent
	// to the client (0 when none was), the gRPC status when the call is
	// gRPC ("" otherwise), and a short error class when the proxy failed
	// the exchange or it was aborted ("" otherwise).
	End(status int, grpcStatus string, errClass string)
}

// Attribute keys (OpenTelemetry's semantic conventions for HTTP spans).
const (
	AttrMethod     = "http.request.method"
	AttrStatusCode = "http.response.status_code"
	AttrURLScheme  = "url.scheme"
	AttrURLPath    = "url.path"
	AttrURLQuery   = "url.query"
	AttrServerAddr = "server.address"
	AttrServerPort = "server.port"
	AttrTransport  = "network.transport"
	AttrProtocol   = "network.protocol.version"
	AttrUserAgent  = "user_agent.original"
	AttrGRPCStatus = "rpc.grpc.status_code"
	AttrErrorType  = "error.type"
	AttrDirection  = "weft.direction"
)

// Attribute is one attribute of a span.
type Attribute struct {
	Key   string
	Value string
	// Int is set when the attribute is a number (Value is then its
	// decimal form).
	Int   int64
	IsInt bool
}

// RequestAttributes returns the attributes a span records for r, as
// OpenTelemetry's HTTP conventions name them. Headers that often carry
// credentials are never recorded.
func RequestAttributes(r *http.Request, kind Kind) []Attribute {
	attrs := make([]Attribute, 0, 9)
	attrs = append(attrs,
		Attribute{Key: AttrMethod, Value: r.Method},
		Attribute{Key: AttrURLScheme, Value: "http"},
		Attribute{Key: AttrURLPath, Value: r.URL.Path},
		Attribute{Key: AttrTransport, Value: "tcp"},
		Attribute{Key: AttrProtocol, Value: protocolVersion(r)},
		Attribute{Key: AttrDirection, Value: direction(kind)},
	)
	if r.URL.RawQuery != "" {
		attrs = append(attrs, Attribute{Key: AttrURLQuery, Value: r.URL.RawQuery})
	}
	if host, port := splitHostPort(r.Host); host != "" {
		attrs = append(attrs, Attribute{Key: AttrServerAddr, Value: host})
		if n, err := strconv.ParseUint(port, 10, 16); err == nil {
			attrs = append(attrs, Attribute{Key: AttrServerPort, Value: port, Int: int64(n), IsInt: true})
		}
	}
	if ua := r.Header.Get("User-Agent"); ua != "" {
		attrs = append(attrs, Attribute{Key: AttrUserAgent, Value: ua})
	}
	return attrs
}

func direction(k Kind) string {
	if k == Server {
		return "inbound"
	}
	return "outbound"
}

func protocolVersion(r *http.Request) string {
	if r.ProtoMajor == 2 {
		return "2"
	}
	if r.ProtoMinor == 0 {
		return "1.0"
	}
	return "1.1"
}

// splitHostPort splits an authority; a bracketed IPv6 host loses its
// brackets. A malformed one is returned as the host with no port.
func splitHostPort(a string) (host, port string) {
	if a == "" {
		return "", ""
	}
	if a[0] == '[' {
		for i := 1; i < len(a); i++ {
			if a[i] == ']' {
				if i+1 < len(a) && a[i+1] == ':' {
					return a[1:i], a[i+2:]
				}
				return a[1:i], ""
			}
		}
		return a, ""
	}
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:]
		}
	}
	return a, ""
}
