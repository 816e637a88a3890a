package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weftmesh/weft/apis/crds"
)

// The Linkerd kinds are checked against their CRD schemas, the ones
// embedded in package crds, the way the API server checks a custom
// resource: defaults are filled in, and required fields, enums, patterns,
// lengths, item counts and numeric bounds are enforced. Of the CEL rules
// (x-kubernetes-validations), the two shapes our own markers generate are
// evaluated: "exactly one of these fields" and "this field is set if and
// only if type is this value". Other rules, which come from the Gateway API
// types that HTTPRoute reuses, are left to the API server.

// crdSchemas maps each served Linkerd kind to its version's schema.
type crdSchemas map[schema.GroupVersionKind]*apiextensionsv1.JSONSchemaProps

// embeddedSchemas parses the embedded CRDs once per process. The result is
// derived from data compiled into the binary and is never modified, so
// sharing it is safe; it only saves every Decode call from parsing the
// same YAML again.
var embeddedSchemas = sync.OnceValues(loadCRDSchemas)

func loadCRDSchemas() (crdSchemas, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	out := crdSchemas{}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out, nil
}

// schemaProblem is one violation of a schema.
type schemaProblem struct {
	field string
	err   error
	// missing is set for a required field that is absent; parent is the
	// object that lacks it, whose line locates the problem.
	missing bool
	parent  string
}

// schemaChecker walks a JSON value alongside a schema. It caches compiled
// patterns for one decoder.
type schemaChecker struct {
	patterns map[string]*regexp.Regexp
}

// check validates v (decoded with UseNumber) against s and returns the
// problems, each with the path of the offending field.
func (c *schemaChecker) check(path string, v any, s *apiextensionsv1.JSONSchemaProps, out []schemaProblem) []schemaProblem {
	if s == nil || v == nil {
		return out
	}
	bad := func(format string, args ...any) {
		out = append(out, schemaProblem{field: path, err: fmt.Errorf("invalid value for field %q: "+format, append([]any{path}, args...)...)})
	}
	if len(s.Enum) > 0 && !inEnum(v, s.Enum) {
		bad("%s is not one of %s", render(v), renderEnum(s.Enum))
	}
	switch val := v.(type) {
	case map[string]any:
		if path == "metadata" {
			return out // ObjectMeta was checked by the typed decoder
		}
		for _, rule := range s.XValidations {
			if ok, known := evalRule(rule.Rule, val); known && !ok {
				out = append(out, schemaProblem{field: path, err: fmt.Errorf("invalid value for field %q: %s", path, rule.Message)})
			}
		}
		for _, req := range s.Required {
			if val[req] == nil { // absent or null: the API server drops nulls
				f := joinPath(path, req)
				out = append(out, schemaProblem{field: f, err: fmt.Errorf("missing field %q", f), missing: true, parent: path})
			}
		}
		for _, k := range sortedKeys(val) {
			if prop, ok := s.Properties[k]; ok {
				out = c.check(joinPath(path, k), val[k], &prop, out)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				out = c.check(joinPath(path, k), val[k], s.AdditionalProperties.Schema, out)
			}
		}
	case []any:
		if s.MinItems != nil && int64(len(val)) < *s.MinItems {
			bad("has %d items, want at least %d", len(val), *s.MinItems)
		}
		if s.MaxItems != nil && int64(len(val)) > *s.MaxItems {
			bad("has %d items, want at most %d", len(val), *s.MaxItems)
		}
		if s.Items != nil && s.Items.Schema != nil {
			for i, item := range val {
				out = c.check(path+"["+strconv.Itoa(i)+"]", item, s.Items.Schema, out)
			}
		}
	case string:
		n := int64(utf8.RuneCountInString(val))
		if s.MinLength != nil && n < *s.MinLength {
			bad("%q is shorter than %d characters", val, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			bad("is longer than %d characters", *s.MaxLength)
		}
		if s.Pattern != "" {
			if re := c.pattern(s.Pattern); re != nil && !re.MatchString(val) {
				bad("%q does not match %s", val, s.Pattern)
			}
		}
	case json.Number:
		if f, err := val.Float64(); err == nil {
			if s.Minimum != nil && (f < *s.Minimum || (s.ExclusiveMinimum && f == *s.Minimum)) {
				bad("%s is below the minimum %v", val, *s.Minimum)
			}
			if s.Maximum != nil && (f > *s.Maximum || (s.ExclusiveMaximum && f == *s.Maximum)) {
				bad("%s is above the maximum %v", val, *s.Maximum)
			}
		}
	}
	return out
}

func (c *schemaChecker) pattern(p string) *regexp.Regexp {
	if re, ok := c.patterns[p]; ok {
		return re
	}
	re, err := regexp.Compile(p)
	if err != nil {
		re = nil // a pattern Go cannot compile is not enforced here
	}
	if c.patterns == nil {
		c.patterns = map[string]*regexp.Regexp{}
	}
	c.patterns[p] = re
	return re
}

// applyDefaults fills in missing fields that have a schema default, then
// descends into every field, defaulted ones included, as the API server
// does. It reports whether it changed anything.
func applyDefaults(v any, s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	changed := false
	switch val := v.(type) {
	case map[string]any:
		for k, prop := range s.Properties {
			if val[k] != nil || prop.Default == nil {
				continue
			}
			if d, err := decodeNumbers(prop.Default.Raw); err == nil {
				val[k] = d
				changed = true
			}
		}
		for k, item := range val {
			if prop, ok := s.Properties[k]; ok {
				changed = applyDefaults(item, &prop) || changed
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				changed = applyDefaults(item, s.AdditionalProperties.Schema) || changed
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range val {
				changed = applyDefaults(item, s.Items.Schema) || changed
			}
		}
	}
	return changed
}

// decodeNumbers decodes JSON keeping numbers as json.Number.
func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func inEnum(v any, enum []apiextensionsv1.JSON) bool {
	for _, e := range enum {
		ev, err := decodeNumbers(e.Raw)
		if err != nil {
			continue
		}
		if a, ok := v.(json.Number); ok {
			if b, ok := ev.(json.Number); ok {
				fa, errA := a.Float64()
				fb, errB := b.Float64()
				if errA == nil && errB == nil && fa == fb {
					return true
				}
				continue
			}
		}
		if reflect.DeepEqual(v, ev) {
			return true
		}
	}
	return false
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func renderEnum(enum []apiextensionsv1.JSON) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		parts[i] = string(e.Raw)
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	// (has(self.a)?1:0)+(has(self.b)?1:0) == 1, from ExactlyOneOf markers.
	exactlyOneRE = regexp.MustCompile(`^(\(has\(self\.[A-Za-z0-9_]+\)\?1:0\)\+?)+ == 1$`)
	hasFieldRE   = regexp.MustCompile(`has\(self\.([A-Za-z0-9_]+)\)`)
	// has(self.x) == (self.type == 'X'), from the HTTPRoute filter markers.
	fieldIffTypeRE = regexp.MustCompile(`^has\(self\.([A-Za-z0-9_]+)\) == \(self\.type == '([A-Za-z0-9_]+)'\)$`)
)

// evalRule evaluates the CEL rule shapes this package knows on an object.
// known is false for any other rule.
func evalRule(rule string, obj map[string]any) (ok, known bool) {
	if exactlyOneRE.MatchString(rule) {
		n := 0
		for _, m := range hasFieldRE.FindAllStringSubmatch(rule, -1) {
			if obj[m[1]] != nil {
				n++
			}
		}
		return n == 1, true
	}
	if m := fieldIffTypeRE.FindStringSubmatch(rule); m != nil {
		return (obj[m[1]] != nil) == (obj["type"] == m[2]), true
	}
	return false, false
}
