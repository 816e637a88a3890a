package policy

import (
	"fmt"
	"strings"
)

// Severity grades a Problem.
type Severity uint8

// Severities.
const (
	// SeverityWarning: the object is used, but probably not as meant
	// (a lint), or it refers to something missing and grants nothing.
	SeverityWarning Severity = iota
	// SeverityError: the object is invalid and ignored.
	SeverityError
)

// String returns "warning" or "error".
func (s Severity) String() string {
	if s == SeverityError {
		return "error"
	}
	return "warning"
}

// Problem is something wrong with one object, found while indexing.
type Problem struct {
	Severity Severity
	Object   ObjectRef
	// Location is where the object was read from, when known.
	Location Location
	// Field is the path of the offending field ("spec.targetRef"), if any.
	Field   string
	Message string
}

// String renders "warning: web.yaml document 3: AuthorizationPolicy
// my-app/x: spec.targetRef: Server "nope" not found".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Severity.String())
	b.WriteString(": ")
	if l := p.Location.String(); l != "" {
		b.WriteString(l)
		b.WriteString(": ")
	}
	b.WriteString(p.Object.String())
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// problems collects translation findings.
type problems struct {
	objs *Objects
	list []Problem
}

func (p *problems) add(sev Severity, ref ObjectRef, field, format string, args ...any) {
	p.list = append(p.list, Problem{
		Severity: sev, Object: ref, Location: p.objs.Location(ref), Field: field,
		Message: fmt.Sprintf(format, args...),
	})
}

func (p *problems) errorf(ref ObjectRef, field, format string, args ...any) {
	p.add(SeverityError, ref, field, format, args...)
}

func (p *problems) warnf(ref ObjectRef, field, format string, args ...any) {
	p.add(SeverityWarning, ref, field, format, args...)
}
