package manifest

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is one problem in one input, located as precisely as the decoder
// can: the source, the document, the item of a List, the object, the field
// and the line. Decode, DecodeFile and LoadPaths return every Error they
// find joined with errors.Join; use errors.As to get at the first one, or
// walk the joined error's Unwrap() []error for all of them.
type Error struct {
	// Source names the input: the file path, or the name given to Decode.
	Source string
	// Document is the 1-based index of the YAML or JSON document in the
	// source; 0 when the problem is with the source as a whole.
	Document int
	// Item is the 1-based index inside a List document; 0 otherwise.
	Item int
	// Line is the 1-based line in the source where the problem is, when
	// known; 0 otherwise.
	Line int
	// Kind, Namespace and Name identify the object, as far as they could be
	// read.
	Kind, Namespace, Name string
	// Field is the path of the offending field, such as
	// "spec.podSelectr" or "spec.rules[0].matches[0].path.type", when the
	// problem is with one field.
	Field string
	// Err describes the problem.
	Err error
}

// Error formats e as
//
//	manifest: web.yaml: document 2 (Server my-app/web-http): unknown field "spec.podSelectr" (line 12)
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("manifest: ")
	b.WriteString(e.Source)
	if e.Document > 0 {
		b.WriteString(": document ")
		b.WriteString(strconv.Itoa(e.Document))
		if e.Item > 0 {
			b.WriteString(" item ")
			b.WriteString(strconv.Itoa(e.Item))
		}
		if id := e.object(); id != "" {
			b.WriteString(" (")
			b.WriteString(id)
			b.WriteString(")")
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *Error) Unwrap() error { return e.Err }

// object renders "Kind namespace/name" with the parts that are known.
func (e *Error) object() string {
	name := e.Name
	if name != "" && e.Namespace != "" {
		name = e.Namespace + "/" + name
	}
	switch {
	case e.Kind != "" && name != "":
		return e.Kind + " " + name
	case e.Kind != "":
		return e.Kind
	default:
		return name
	}
}
