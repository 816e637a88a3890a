package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decoder holds what one call of Decode, DecodeFile or LoadPaths shares:
// the scheme, the kinds it accepts and the results so far.
type decoder struct {
	scheme   *runtime.Scheme
	accepted map[schema.GroupVersionKind]bool
	objects  []Object
	errs     []error
	dropped  int

	schemas    crdSchemas // loaded on first need
	schemasErr error
	checker    schemaChecker
}

// crdSchema returns the CRD schema for a Linkerd kind, or nil for kinds
// that have none here (core and Gateway API kinds).
func (d *decoder) crdSchema(gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
	if d.schemas == nil && d.schemasErr == nil {
		d.schemas, d.schemasErr = embeddedSchemas()
	}
	if d.schemasErr != nil {
		return nil, d.schemasErr
	}
	return d.schemas[gvk], nil
}

func newDecoder() *decoder {
	s := Scheme()
	d := &decoder{scheme: s, accepted: map[schema.GroupVersionKind]bool{}}
	for gvk := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		obj, err := s.New(gvk)
		if err != nil {
			continue
		}
		// Only real resources and their lists: AddToGroupVersion also
		// registers ListOptions, WatchEvent, Status and the like.
		if _, ok := obj.(metav1.Object); ok || meta.IsListType(obj) {
			d.accepted[gvk] = true
		}
	}
	return d
}

// fail records one problem, up to maxErrors of them.
func (d *decoder) fail(e *Error) {
	if len(d.errs) >= maxErrors {
		d.dropped++
		return
	}
	d.errs = append(d.errs, e)
}

// result returns the objects, or no objects and every problem.
func (d *decoder) result() ([]Object, error) {
	if len(d.errs) == 0 {
		return d.objects, nil
	}
	errs := d.errs
	if d.dropped > 0 {
		errs = append(errs[:len(errs):len(errs)], fmt.Errorf("manifest: %d more problems not shown", d.dropped))
	}
	return nil, errors.Join(errs...)
}

// source decodes every document of one source.
func (d *decoder) source(name string, data []byte) {
	for _, doc := range splitDocuments(data) {
		d.document(name, doc)
	}
}

// docContext is one document being decoded, with its node tree parsed on
// first need.
type docContext struct {
	source string
	doc    document
	tree   *yamlv3.Node
	parsed bool
}

// lineOf returns the absolute line of a field path inside the document,
// or 0. prefix is the path of the object inside the document ("items[2]"
// for a List item).
func (c *docContext) lineOf(prefix, field string) int {
	if !c.parsed {
		c.tree, c.parsed = parseTree(c.doc.data), true
	}
	if c.tree == nil {
		return 0
	}
	path := field
	if prefix != "" {
		path = prefix
		if field != "" {
			path = prefix + "." + field
		}
	}
	if path == "" {
		return 0
	}
	if l := lineOf(c.tree, path); l > 0 {
		return c.doc.line + l - 1
	}
	return 0
}

// header is what identifies an object, read leniently so that errors can
// name the object even when its body is wrong.
type header struct {
	apiVersion, kind, namespace, name, generateName string
	typeErr                                         *Error // apiVersion or kind of the wrong type
}

func (d *decoder) document(source string, doc document) {
	c := &docContext{source: source, doc: doc}
	base := Error{Source: source, Document: doc.index}
	if len(doc.data) > MaxDocumentBytes {
		e := base
		e.Line = doc.line
		e.Err = fmt.Errorf("document is %d bytes, over the limit of %d bytes", len(doc.data), MaxDocumentBytes)
		d.fail(&e)
		return
	}

	js, dups, err := toJSON(doc)
	if err != nil {
		e := base
		e.Line, e.Err = syntaxError(doc, err)
		d.fail(&e)
		return
	}
	if doc.trailing > 0 {
		e := base
		e.Line = doc.trailing
		e.Err = errors.New(`content after the "..." document end marker; start a new document with "---"`)
		d.fail(&e)
		return
	}
	js = bytes.TrimSpace(js)
	if bytes.Equal(js, []byte("null")) || len(js) == 0 {
		return // empty or comment-only document
	}
	if js[0] != '{' {
		e := base
		e.Line = doc.line
		e.Err = fmt.Errorf("document is %s, not an object", describeJSON(js[0]))
		d.fail(&e)
		return
	}

	h := readHeader(js)
	base.Kind, base.Namespace, base.Name = h.kind, h.namespace, h.name
	for _, dup := range dups {
		e := base
		e.Field = dup.path
		e.Line = doc.line + dup.line - 1
		e.Err = fmt.Errorf("duplicate field %q", dup.path)
		d.fail(&e)
	}
	d.object(c, base, "", js, h, schema.GroupVersionKind{})
}

// object decodes one object (a document, or an item of a List document).
// itemPath is the object's path inside the document; def is the kind an
// item of a typed list gets when it does not name one.
func (d *decoder) object(c *docContext, base Error, itemPath string, js []byte, h header, def schema.GroupVersionKind) {
	// at locates a problem at a field; near, when given, is the field to
	// take the line from (the parent of a missing field).
	at := func(field string, err error, near ...string) *Error {
		e := base
		e.Field = field
		e.Line = c.lineOf(itemPath, field)
		for _, n := range near {
			e.Line = c.lineOf(itemPath, n)
		}
		e.Err = err
		return &e
	}
	if h.typeErr != nil {
		e := at(h.typeErr.Field, h.typeErr.Err)
		d.fail(e)
		return
	}
	if def.Kind != "" {
		if h.apiVersion == "" {
			h.apiVersion = def.GroupVersion().String()
		}
		if h.kind == "" {
			h.kind = def.Kind
			base.Kind = def.Kind
		}
	}
	missing := false
	for _, f := range []struct{ name, value string }{{"apiVersion", h.apiVersion}, {"kind", h.kind}} {
		if f.value == "" {
			d.fail(at(f.name, fmt.Errorf("missing field %q", f.name)))
			missing = true
		}
	}
	if missing {
		return
	}
	gv, err := schema.ParseGroupVersion(h.apiVersion)
	if err != nil {
		d.fail(at("apiVersion", fmt.Errorf("invalid apiVersion %q", h.apiVersion)))
		return
	}
	gvk := gv.WithKind(h.kind)
	if !d.accepted[gvk] {
		d.fail(at("kind", d.unknownKind(gvk)))
		return
	}
	if def.Kind != "" && gvk != def {
		d.fail(at("kind", fmt.Errorf("%s item in a %sList", describeGVK(gvk), def.Kind)))
		return
	}

	obj, err := d.scheme.New(gvk)
	if err != nil {
		d.fail(at("kind", fmt.Errorf("cannot make a %s: %w", describeGVK(gvk), err)))
		return
	}
	if meta.IsListType(obj) {
		if itemPath != "" {
			d.fail(at("kind", errors.New("a list may not hold another list")))
			return
		}
		d.list(c, base, js, gvk)
		return
	}

	strict, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		field, msg := typeError(obj, err)
		d.fail(at(field, msg))
		return
	}
	bad := false
	for _, se := range strict {
		field := ""
		var fe kjson.FieldError
		if errors.As(se, &fe) {
			field = fe.FieldPath()
		}
		d.fail(at(field, se))
		bad = true
	}
	if bad {
		return
	}
	if h.name == "" && h.generateName == "" {
		d.fail(at("metadata.name", errors.New(`missing field "metadata.name"`)))
		return
	}
	props, err := d.crdSchema(gvk)
	if err != nil {
		d.fail(at("", fmt.Errorf("reading the CRD schemas: %w", err)))
		return
	}
	if props != nil {
		if obj = d.admit(gvk, obj, js, props, at); obj == nil {
			return
		}
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	d.objects = append(d.objects, Object{Source: c.source, Document: c.doc.index, Item: base.Item, Object: obj})
}

// admit checks a Linkerd object against its CRD schema and decodes it
// again with the schema's defaults filled in, as the API server would
// store it. It returns nil after recording the problems.
func (d *decoder) admit(gvk schema.GroupVersionKind, obj runtime.Object, js []byte, props *apiextensionsv1.JSONSchemaProps, at func(string, error, ...string) *Error) runtime.Object {
	v, err := decodeNumbers(js)
	if err != nil {
		d.fail(at("", err))
		return nil
	}
	problems := d.checker.check("", v, props, nil)
	for _, p := range problems {
		if p.missing {
			d.fail(at(p.field, p.err, p.parent))
		} else {
			d.fail(at(p.field, p.err))
		}
	}
	if len(problems) > 0 {
		return nil
	}
	if !applyDefaults(v, props) {
		return obj // nothing to fill in: the object is already as stored
	}
	defaulted, err := json.Marshal(v)
	if err != nil {
		d.fail(at("", err))
		return nil
	}
	obj, err = d.scheme.New(gvk)
	if err != nil {
		d.fail(at("kind", err))
		return nil
	}
	if strict, err := kjson.UnmarshalStrict(defaulted, obj); err != nil || len(strict) > 0 {
		// The schema is generated from the Go types, so its defaults
		// always fit them; this would be a generator bug.
		d.fail(at("", fmt.Errorf("applying the CRD defaults: %v", errors.Join(append(strict, err)...))))
		return nil
	}
	return obj
}

// listEnvelope is a list document minus its items.
type listEnvelope struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []json.RawMessage `json:"items"`
}

// list decodes a v1 List or a typed list (ServerList, PodList, ...) item by
// item, so that each item is checked, located and returned on its own.
func (d *decoder) list(c *docContext, base Error, js []byte, gvk schema.GroupVersionKind) {
	var env listEnvelope
	strict, err := kjson.UnmarshalStrict(js, &env)
	if err != nil {
		field, msg := typeError(&env, err)
		e := base
		e.Field, e.Line, e.Err = field, c.lineOf("", field), msg
		d.fail(&e)
		return
	}
	for _, se := range strict {
		e := base
		var fe kjson.FieldError
		if errors.As(se, &fe) {
			e.Field = fe.FieldPath()
		}
		e.Line, e.Err = c.lineOf("", e.Field), se
		d.fail(&e)
	}
	if len(strict) > 0 {
		return
	}
	var def schema.GroupVersionKind
	if !(gvk.Group == "" && gvk.Kind == "List") {
		def = gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
	}
	for i, raw := range env.Items {
		item := bytes.TrimSpace(raw)
		e := base
		e.Item = i + 1
		e.Kind, e.Namespace, e.Name = "", "", ""
		path := "items[" + strconv.Itoa(i) + "]"
		if len(item) == 0 || item[0] != '{' {
			e.Line = c.lineOf(path, "")
			e.Err = fmt.Errorf("item is %s, not an object", describeJSON(firstByte(item)))
			d.fail(&e)
			continue
		}
		h := readHeader(item)
		e.Kind, e.Namespace, e.Name = h.kind, h.namespace, h.name
		if e.Kind == "" {
			e.Kind = def.Kind
		}
		d.object(c, e, path, item, h, def)
	}
}

// readHeader reads apiVersion, kind and the object's name from a JSON
// object without failing on the rest of it.
func readHeader(js []byte) header {
	var h header
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil {
		return h
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"apiVersion", &h.apiVersion}, {"kind", &h.kind}} {
		raw, ok := top[f.name]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if json.Unmarshal(raw, f.dst) != nil {
			if h.typeErr == nil {
				h.typeErr = &Error{Field: f.name, Err: fmt.Errorf("wrong type for field %q: got %s, want string", f.name, jsonType(firstByte(bytes.TrimSpace(raw))))}
			}
		}
	}
	var m struct {
		Name         any `json:"name"`
		Namespace    any `json:"namespace"`
		GenerateName any `json:"generateName"`
	}
	if raw, ok := top["metadata"]; ok && json.Unmarshal(raw, &m) == nil {
		h.name, _ = m.Name.(string)
		h.namespace, _ = m.Namespace.(string)
		h.generateName, _ = m.GenerateName.(string)
	}
	return h
}

// toJSON converts a document to JSON and lists its duplicate keys. A
// duplicate key does not stop the conversion (the last value wins, as
// kubectl reads it) so that the rest of the document is still checked.
func toJSON(doc document) ([]byte, []duplicate, error) {
	if doc.json {
		// Duplicate keys in JSON are reported by the strict decoder.
		return doc.data, nil, nil
	}
	js, strictErr := yaml.YAMLToJSONStrict(doc.data)
	if strictErr == nil {
		return js, nil, nil
	}
	js, err := yaml.YAMLToJSON(doc.data)
	if err != nil {
		return nil, nil, err
	}
	// Only strictness failed: find the duplicates with their paths.
	dups := findDuplicates(parseTree(doc.data))
	if len(dups) == 0 {
		// A strictness problem we cannot place; report it as it is.
		return nil, nil, strictErr
	}
	return js, dups, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+):\s*`)

// syntaxError turns a YAML parser error into a message with the line
// counted from the start of the source.
func syntaxError(doc document, err error) (int, error) {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := doc.line
	if m := yamlLineRE.FindStringSubmatchIndex(msg); m != nil {
		if n, convErr := strconv.Atoi(msg[m[2]:m[3]]); convErr == nil {
			// The parser counts from the document's first line; the
			// error carries the line in the source instead.
			line = doc.line + n - 1
			msg = msg[:m[0]] + msg[m[1]:]
		}
	}
	return line, fmt.Errorf("invalid YAML: %s", strings.Join(strings.Fields(msg), " "))
}

// unknownKind explains why a kind is not accepted, naming the versions
// that are when the kind exists under another apiVersion.
func (d *decoder) unknownKind(gvk schema.GroupVersionKind) error {
	var versions []string
	var caseMatch string
	for known := range d.accepted {
		switch {
		case known.Kind == gvk.Kind && known.Group == gvk.Group:
			versions = append(versions, known.GroupVersion().String())
		case strings.EqualFold(known.Kind, gvk.Kind) && known.GroupVersion() == gvk.GroupVersion():
			caseMatch = known.Kind
		}
	}
	sort.Strings(versions)
	switch {
	case caseMatch != "":
		return fmt.Errorf("unknown kind %q for apiVersion %q; kinds are case-sensitive: did you mean %q?", gvk.Kind, gvk.GroupVersion().String(), caseMatch)
	case len(versions) > 0:
		return fmt.Errorf("kind %q is not served at apiVersion %q; use %s", gvk.Kind, gvk.GroupVersion().String(), strings.Join(versions, " or "))
	default:
		return fmt.Errorf("unknown kind %q for apiVersion %q", gvk.Kind, gvk.GroupVersion().String())
	}
}

func describeGVK(gvk schema.GroupVersionKind) string {
	return gvk.Kind + " (" + gvk.GroupVersion().String() + ")"
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// jsonType names the JSON type of a value from its first byte.
func jsonType(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case 0:
		return "nothing"
	default:
		return "number"
	}
}

// describeJSON is jsonType with an article, for sentences.
func describeJSON(c byte) string {
	switch t := jsonType(c); t {
	case "object":
		return "an object"
	case "null", "nothing":
		return t
	default:
		return "a " + t
	}
}
