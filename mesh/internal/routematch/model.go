package routematch

import "regexp"

// Host matches the request's authority: exactly, or with Suffix set, any
// name ending in "." + Value (a wildcard "*.Value"). Case and a trailing
// dot of Value do not matter.
type Host struct {
	Value  string
	Suffix bool
}

// PathKind is how a path match compares.
type PathKind uint8

// Path match kinds.
const (
	PathPrefix PathKind = iota
	PathExact
	PathRegex
)

// Path matches the request path (without the query).
type Path struct {
	Kind PathKind
	// Value is the exact path or prefix; for PathRegex the expression's
	// source.
	Value string
	// Regex is the compiled expression for PathRegex, anchored at both
	// ends (see [Anchored]).
	Regex *regexp.Regexp
}

// Value matches a header or query parameter value, exactly or with a
// regular expression anchored at both ends.
type Value struct {
	// Name of the header (any case) or query parameter (exact).
	Name  string
	Exact string
	Regex *regexp.Regexp
}

// HTTP is one match of an HTTPRoute rule; every present condition must
// hold.
type HTTP struct {
	// Path is nil when the match has no path condition (a prefix "/").
	Path    *Path
	Headers []Value
	Query   []Value
	// Method is empty for any method.
	Method string
}

// GRPC is one match of a GRPCRoute rule: service and method (empty for
// any) and headers.
type GRPC struct {
	Service string
	Method  string
	Headers []Value
}

// Anchored compiles a Gateway API regular expression so that it must
// match a whole value, as both Linkerd and the Gateway API read it.
func Anchored(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}
