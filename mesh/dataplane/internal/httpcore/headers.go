package httpcore

import (
	"net/http"
	"strings"
)

// meshPrefixes are the prefixes of the mesh's own headers, in canonical
// form: Linkerd's l5d-* and Weft's weft-*.
var meshPrefixes = [...]string{"L5d-", "Weft-"}

// IsMeshHeader reports whether a header name, in any case, belongs to the
// mesh. A proxy trusts such a header only from the peer proxy of the same
// hop; from anyone else it is dropped, and the proxy sets its own.
func IsMeshHeader(k string) bool {
	for _, p := range meshPrefixes {
		if len(k) >= len(p) && strings.EqualFold(k[:len(p)], p) {
			return true
		}
	}
	return false
}

// RemoveMeshHeaders deletes the mesh's own headers (l5d-*, weft-*).
func RemoveMeshHeaders(h http.Header) {
	for k := range h {
		if IsMeshHeader(k) {
			delete(h, k)
		}
	}
}
