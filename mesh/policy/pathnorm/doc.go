// Package pathnorm turns the path of an HTTP request target into the one
// form that Weft matches routes and authorization policy against.
//
// Authorization bypasses in other meshes came from a policy engine and a
// backend reading the same path differently: "/public/../admin",
// "//admin", "/%2e%2e/admin", "/admin%2F", "/..;/admin" (see
// docs/policy.md). Weft removes the ambiguity in one pure function,
// [Normalize], that both the policy controller (for offline evaluation and
// for route values) and the proxy (for every inbound request) call:
//
//	p, err := pathnorm.Normalize(rawPath)
//	if err != nil {
//		// refuse the request: the path is ambiguous or malformed
//	}
//	// match routes on p, and forward p to the application
//
// The normalized form:
//
//   - starts with "/" (an empty path becomes "/");
//   - has percent-encoded unreserved characters (letters, digits, "-", ".",
//     "_", "~") decoded, so "/%61dmin" is "/admin", and every other
//     percent-encoding written with upper-case hex digits ("%3b" is "%3B");
//   - has bytes that may not appear raw in a path (controls excepted, which
//     are refused) percent-encoded, for example a raw space or byte >= 0x80;
//   - has no empty segments ("//a///b" is "/a/b"); a trailing "/" is kept;
//   - has no "." or ".." segments: they are resolved as RFC 3986 section
//     5.2.4 says, after the decoding above, and ".." never climbs above
//     the root ("/../admin" is "/admin").
//
// Normalize refuses, with an error wrapping [ErrInvalid]:
//
//   - an encoded slash or backslash ("%2F", "%5C"): decoding them would
//     change the segment structure and leaving them encoded lets backends
//     that decode them see another path, so neither is safe;
//   - a raw backslash, which some servers treat as a separator;
//   - a fragment ("#") or a query ("?"): split the query off first with
//     [SplitTarget], which also refuses fragments;
//   - path parameters on a dot segment ("/..;/admin", "/.;x/a"), which some
//     servers resolve as ".." and others do not; parameters on other
//     segments ("/a;v=1") are kept as they are;
//   - control characters, raw or encoded ("%00", "%0A", "%7F");
//   - malformed percent-encodings ("%", "%4", "%zz");
//   - paths longer than [MaxLength] bytes.
//
// Normalize is idempotent: Normalize(Normalize(p)) == Normalize(p). The
// fuzz target FuzzNormalize checks this, and mesh/policy checks that an
// authorization decision on a raw path equals the decision on its
// normalized form.
//
// The package imports only the standard library so the proxy can use it
// without pulling in the control plane.
package pathnorm
