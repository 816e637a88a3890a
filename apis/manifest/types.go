package manifest

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The JSON decoder reports a value of the wrong type as
//
//	json: cannot unmarshal string into Go struct field ServerSpec.spec.port of type int32
//
// which names Go types. typeError rewrites it in the terms of the manifest:
// the field path and the JSON types.
var (
	structFieldRE = regexp.MustCompile(`^json: cannot unmarshal (\w+) into Go struct field [^ ]*?\.([^ .][^ ]*) of type (\S+)$`)
	goValueRE     = regexp.MustCompile(`^json: cannot unmarshal (\w+) into Go value of type (\S+)$`)
)

// typeError returns the field path (when known) and a readable message for
// an error from decoding into obj.
func typeError(obj any, err error) (string, error) {
	msg := err.Error()
	if m := structFieldRE.FindStringSubmatch(msg); m != nil {
		// m[2] is the path after the Go struct name, which may itself hold
		// dots: "ServerSpec.spec.port" -> "spec.port".
		field, goType := m[2], m[3]
		want := ""
		if t := typeAt(reflect.TypeOf(obj), strings.Split(field, ".")); t != nil {
			if elem(t).Kind() == reflect.Map && !strings.HasPrefix(goType, "map[") {
				// The value is an entry of a map, such as a label.
				t = elem(t).Elem()
			}
			want = describe(t)
		}
		if want == "" {
			want = goKind(goType)
		}
		return field, fmt.Errorf("wrong type for field %q: got %s, want %s", field, jsonKind(m[1]), want)
	}
	if m := goValueRE.FindStringSubmatch(msg); m != nil {
		return "", fmt.Errorf("wrong type: got %s, want %s", jsonKind(m[1]), goKind(m[2]))
	}
	// Errors from a type's own decoding (a bad time, bad base64, a bad
	// quantity) name no field.
	return "", fmt.Errorf("invalid value: %s", msg)
}

// jsonKind names a JSON type as the decoder's message gives it.
func jsonKind(s string) string {
	switch s {
	case "array":
		return "list"
	case "bool":
		return "boolean"
	default:
		return s
	}
}

// goKind names a JSON type for a bare Go type name.
func goKind(s string) string {
	switch {
	case s == "string":
		return "string"
	case s == "bool":
		return "boolean"
	case strings.HasPrefix(s, "int") || strings.HasPrefix(s, "uint"):
		return "integer"
	case strings.HasPrefix(s, "float"):
		return "number"
	case strings.HasPrefix(s, "[]"):
		return "list"
	case strings.HasPrefix(s, "map["):
		return "object"
	default:
		return s
	}
}

var (
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	timeType        = reflect.TypeFor[metav1.Time]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	durationType    = reflect.TypeFor[metav1.Duration]()
	rawType         = reflect.TypeFor[runtime.RawExtension]()
	bytesType       = reflect.TypeFor[[]byte]()
)

// typeAt follows a JSON field path (without list indices, as the decoder
// reports it) through a Go type and returns the type found there, or nil
// when the path cannot be followed.
func typeAt(t reflect.Type, path []string) reflect.Type {
	for _, name := range path {
		t = elem(t)
		if t.Kind() == reflect.Map {
			t = t.Elem()
			continue
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := jsonField(t, name)
		if !ok {
			return nil
		}
		t = f
	}
	return t
}

// elem strips pointers and, since paths carry no list indices, lists.
func elem(t reflect.Type) reflect.Type {
	for {
		switch {
		case t.Kind() == reflect.Pointer:
			t = t.Elem()
		case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t != bytesType:
			t = t.Elem()
		default:
			return t
		}
	}
}

// jsonField finds the field of a struct that JSON calls name, looking into
// embedded and inlined structs.
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" && (f.Anonymous || strings.Contains(f.Tag.Get("json"), "inline")) {
			inner := f.Type
			for inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if ft, ok := jsonField(inner, name); ok {
					return ft, true
				}
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// describe names the JSON type a Go type decodes from.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case intOrStringType:
		return "integer or string"
	case quantityType:
		return "quantity (number or string such as \"100m\")"
	case timeType, microTimeType:
		return "RFC 3339 time string"
	case durationType:
		return "duration string such as \"10s\""
	case rawType:
		return "object"
	case bytesType:
		return "base64 string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map, reflect.Struct:
		return "object"
	default:
		return ""
	}
}
