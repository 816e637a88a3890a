// Package protofacts renders the wire-relevant facts of proto files (their
// package, imports, services, methods, messages, fields, oneofs, enums and
// reserved ranges) as sorted one-line statements, so that two schemas can
// be compared with a plain diff. Comments, options and declaration order
// do not appear: they do not change the wire.
//
// It is used by apis/proxy's schema test (Weft's generated descriptors
// against a table of linkerd2-proxy-api's facts) and by
// hack/proxyapi-facts, which renders a table from a protoc descriptor set.
package protofacts

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/descriptorpb"
)

// Render returns the facts of the files whose package starts with
// prefix, sorted. Files of other packages (well-known types) are left out.
func Render(files []*descriptorpb.FileDescriptorProto, prefix string) []string {
	var out []string
	for _, f := range files {
		if !strings.HasPrefix(f.GetPackage(), prefix) {
			continue
		}
		out = append(out, renderFile(f)...)
	}
	sort.Strings(out)
	return out
}

func renderFile(f *descriptorpb.FileDescriptorProto) []string {
	pkg := f.GetPackage()
	out := []string{fmt.Sprintf("file %s package %s", f.GetName(), pkg)}
	for _, d := range f.GetDependency() {
		out = append(out, fmt.Sprintf("import %s %s", f.GetName(), d))
	}
	if f.GetSyntax() != "" {
		out = append(out, fmt.Sprintf("syntax %s %s", f.GetName(), f.GetSyntax()))
	}
	for _, s := range f.GetService() {
		name := pkg + "." + s.GetName()
		out = append(out, "service "+name)
		for _, m := range s.GetMethod() {
			in, res := m.GetInputType(), m.GetOutputType()
			if m.GetClientStreaming() {
				in = "stream " + in
			}
			if m.GetServerStreaming() {
				res = "stream " + res
			}
			out = append(out, fmt.Sprintf("method %s/%s (%s) returns (%s)", name, m.GetName(), in, res))
		}
	}
	for _, e := range f.GetEnumType() {
		out = append(out, renderEnum(pkg, e)...)
	}
	for _, m := range f.GetMessageType() {
		out = append(out, renderMessage(pkg, m)...)
	}
	return out
}

func renderEnum(scope string, e *descriptorpb.EnumDescriptorProto) []string {
	name := scope + "." + e.GetName()
	out := []string{"enum " + name}
	for _, v := range e.GetValue() {
		out = append(out, fmt.Sprintf("value %s.%s = %d", name, v.GetName(), v.GetNumber()))
	}
	for _, r := range e.GetReservedRange() {
		out = append(out, fmt.Sprintf("reserved %s %d-%d", name, r.GetStart(), r.GetEnd()))
	}
	for _, r := range e.GetReservedName() {
		out = append(out, fmt.Sprintf("reserved %s %q", name, r))
	}
	return out
}

// mapEntry returns the key and value types of a map field's entry type.
func mapEntry(m *descriptorpb.DescriptorProto, typeName string) (string, string, bool) {
	for _, n := range m.GetNestedType() {
		if !n.GetOptions().GetMapEntry() || !strings.HasSuffix(typeName, "."+n.GetName()) {
			continue
		}
		var k, v string
		for _, f := range n.GetField() {
			switch f.GetNumber() {
			case 1:
				k = fieldType(f)
			case 2:
				v = fieldType(f)
			}
		}
		return k, v, true
	}
	return "", "", false
}

func fieldType(f *descriptorpb.FieldDescriptorProto) string {
	switch f.GetType() {
	case descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, descriptorpb.FieldDescriptorProto_TYPE_ENUM, descriptorpb.FieldDescriptorProto_TYPE_GROUP:
		return f.GetTypeName()
	}
	return strings.ToLower(strings.TrimPrefix(f.GetType().String(), "TYPE_"))
}

func renderMessage(scope string, m *descriptorpb.DescriptorProto) []string {
	if m.GetOptions().GetMapEntry() {
		return nil
	}
	name := scope + "." + m.GetName()
	out := []string{"message " + name}
	var oneofs []string
	for i, o := range m.GetOneofDecl() {
		synthetic := false
		for _, f := range m.GetField() {
			if f.OneofIndex != nil && int(f.GetOneofIndex()) == i && f.GetProto3Optional() {
				synthetic = true
			}
		}
		if synthetic {
			oneofs = append(oneofs, "")
			continue
		}
		oneofs = append(oneofs, o.GetName())
		out = append(out, fmt.Sprintf("oneof %s.%s", name, o.GetName()))
	}
	for _, f := range m.GetField() {
		label := "singular"
		switch {
		case f.GetLabel() == descriptorpb.FieldDescriptorProto_LABEL_REPEATED:
			label = "repeated"
		case f.GetLabel() == descriptorpb.FieldDescriptorProto_LABEL_REQUIRED:
			label = "required"
		case f.GetProto3Optional():
			label = "optional"
		}
		typ := fieldType(f)
		if label == "repeated" && f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
			if k, v, ok := mapEntry(m, f.GetTypeName()); ok {
				label, typ = "map", fmt.Sprintf("<%s,%s>", k, v)
			}
		}
		line := fmt.Sprintf("field %s.%s = %d %s %s", name, f.GetName(), f.GetNumber(), label, typ)
		if f.OneofIndex != nil && oneofs[f.GetOneofIndex()] != "" {
			line += " oneof " + oneofs[f.GetOneofIndex()]
		}
		out = append(out, line)
	}
	for _, r := range m.GetReservedRange() {
		// Message reserved ranges are end-exclusive in descriptors.
		out = append(out, fmt.Sprintf("reserved %s %d-%d", name, r.GetStart(), r.GetEnd()-1))
	}
	for _, r := range m.GetReservedName() {
		out = append(out, fmt.Sprintf("reserved %s %q", name, r))
	}
	for _, e := range m.GetEnumType() {
		out = append(out, renderEnum(name, e)...)
	}
	for _, n := range m.GetNestedType() {
		out = append(out, renderMessage(name, n)...)
	}
	return out
}

// Diff returns the lines only in want (missing) and only in got (extra);
// both inputs must be sorted.
func Diff(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i] < got[j]):
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}
