package dataplane

import (
	"net/http"
	"strings"
)

// meshPrefixes are the prefixes of the mesh's own headers, in canonical
// form: Linkerd's l5d-* and Weft's weft-*.
var meshPrefixes = [...]string{"L5d-", "Weft-"}

// isMeshHeader reports whether a header name, in any case, belongs to the
// mesh. A proxy trusts such a header only from the peer proxy of the same
// hop; from anyone else it is dropped, and the proxy sets its own.
func isMeshHeader(k string) bool {
	for _, p := range meshPrefixes {
		if len(k) >= len(p) && strings.EqualFold(k[:len(p)], p) {
			return true
		}
	}
	return false
}

// removeMeshHeaders deletes the mesh's own headers (l5d-*, weft-*).
func removeMeshHeaders(h http.Header) {
	for k := range h {
		if isMeshHeader(k) {
			delete(h, k)
		}
	}
}
