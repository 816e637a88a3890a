package httpcore

// Mesh-internal headers. Each proxy removes every l5d-* and weft-* header
// it receives from anything but the peer proxy of the same hop, and sets
// its own.
const (
	// HeaderOrigProto carries the client's HTTP/1 version across the
	// HTTP/2 hop between proxies; the inbound proxy restores it. The
	// HTTP/1.1 hop needs and sends none.
	HeaderOrigProto = "L5d-Orig-Proto"
	// HeaderClientID tells the application the verified identity of the
	// client (inbound, mesh TLS only).
	HeaderClientID = "L5d-Client-Id"
	// HeaderProxyError explains a response the proxy made itself.
	HeaderProxyError = "L5d-Proxy-Error"
	// HeaderDenyReason names the class of an authorization denial
	// (unauthorized, no-route, invalid-path, ambiguous-request,
	// no-policy).
	HeaderDenyReason = "Weft-Deny-Reason"
)

// HeaderDstCanonical carries the Service's canonical name from the
// client proxy to the server proxy (the server side's route metrics).
const HeaderDstCanonical = "L5d-Dst-Canonical"

// OrigProto returns the HTTP/1 version an l5d-orig-proto value carries,
// or "" for any value other than those Linkerd's proxies send (Weft's
// send "HTTP/1.1"): "HTTP/1.1" or "HTTP/1.0", optionally followed by
// "; absolute-form". The inbound proxy honours the header only on an
// HTTP/2 request from a peer proxy with a verified identity; a request
// whose value is unknown stays HTTP/2, as Linkerd's proxy leaves it, and
// the header is dropped with the mesh's others either way.
func OrigProto(v string) string {
	switch v {
	case "HTTP/1.1", "HTTP/1.1; absolute-form":
		return "HTTP/1.1"
	case "HTTP/1.0", "HTTP/1.0; absolute-form":
		return "HTTP/1.0"
	}
	return ""
}
