// Package origdst reads the original destination of a connection that
// netfilter redirected (SO_ORIGINAL_DST), for the proxy's transparent
// listeners and for weft-init's network validator.
package origdst

import "errors"

// ErrNotRedirected means the connection was not redirected by netfilter
// (or the platform has no netfilter).
var ErrNotRedirected = errors.New("connection has no original destination")
