package proxy_test

// The schema test compares every generated descriptor under apis/proxy with
// a table of linkerd2-proxy-api v0.20.0's wire facts (testdata/*.facts):
// packages, imports, services, methods, messages, fields with their number,
// label, type and oneof, oneofs, enums, values and reserved ranges. The
// descriptors are read from the raw descriptor constants in the generated
// files, so a file added under apis/proxy (tap.proto's package, when it
// lands) is compared without editing this test.

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/weftmesh/weft/internal/protofacts"
)

const upstreamFacts = "testdata/linkerd2-proxy-api-v0.20.0.facts"

// Documented differences (README.md): identity.proto imports the standard
// timestamp.proto where upstream vendors it under another path; the type,
// google.protobuf.Timestamp, is the same.
var (
	upstreamTimestampImport = "import identity.proto google/protobuf/timestamp/timestamp.proto"
	weftTimestampImport     = "import identity.proto google/protobuf/timestamp.proto"
)

// tapFacts reports whether a fact belongs to tap.proto.
func tapFacts(line string) bool {
	return strings.Contains(line, " tap.proto") || strings.Contains(line, "io.linkerd.proxy.tap.")
}

func readFacts(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	require.True(t, sort.StringsAreSorted(out), "%s must be sorted", path)
	return out
}

// rawDescriptor folds the string constant file_*_rawDesc of a generated
// file into the serialized FileDescriptorProto it holds.
func rawDescriptor(path string) ([]byte, bool, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, false, err
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "file_") || !strings.HasSuffix(n.Name, "_rawDesc") {
					continue
				}
				var b strings.Builder
				if err := foldString(vs.Values[i], &b); err != nil {
					return nil, false, fmt.Errorf("%s: %s: %w", path, n.Name, err)
				}
				return []byte(b.String()), true, nil
			}
		}
	}
	return nil, false, nil
}

func foldString(e ast.Expr, b *strings.Builder) error {
	switch v := e.(type) {
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return fmt.Errorf("unexpected operator %s", v.Op)
		}
		if err := foldString(v.X, b); err != nil {
			return err
		}
		return foldString(v.Y, b)
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return fmt.Errorf("unexpected literal %s", v.Value)
		}
		s, err := strconv.Unquote(v.Value)
		if err != nil {
			return err
		}
		b.WriteString(s)
		return nil
	case *ast.ParenExpr:
		return foldString(v.X, b)
	}
	return fmt.Errorf("unexpected expression %T", e)
}

// weftDescriptors reads every generated descriptor under apis/proxy.
func weftDescriptors(t *testing.T) []*descriptorpb.FileDescriptorProto {
	t.Helper()
	paths, err := filepath.Glob("*/*.pb.go")
	require.NoError(t, err)
	var out []*descriptorpb.FileDescriptorProto
	for _, p := range paths {
		if strings.HasSuffix(p, "_grpc.pb.go") {
			continue
		}
		raw, ok, err := rawDescriptor(p)
		require.NoError(t, err)
		require.True(t, ok, "%s holds no raw descriptor constant", p)
		fd := &descriptorpb.FileDescriptorProto{}
		require.NoError(t, proto.Unmarshal(raw, fd), p)
		out = append(out, fd)
	}
	require.NotEmpty(t, out)
	return out
}

// compareSchemas returns every difference between upstream's facts and
// Weft's that is not documented. tapPresent says whether Weft has
// tap.proto; without it, tap's facts are the one documented absence.
func compareSchemas(upstream, weft []string, tapPresent bool) []string {
	missing, extra := protofacts.Diff(upstream, weft)
	var problems []string
	for _, l := range missing {
		switch {
		case l == upstreamTimestampImport:
		case !tapPresent && tapFacts(l):
		default:
			problems = append(problems, "upstream has, Weft lacks: "+l)
		}
	}
	for _, l := range extra {
		if l == weftTimestampImport {
			continue
		}
		problems = append(problems, "Weft has, upstream lacks: "+l)
	}
	return problems
}

func hasTap(files []*descriptorpb.FileDescriptorProto) bool {
	for _, f := range files {
		if f.GetPackage() == "io.linkerd.proxy.tap" {
			return true
		}
	}
	return false
}

func TestSchemaMatchesLinkerd2ProxyAPIv0_20FactByFact(t *testing.T) {
	upstream := readFacts(t, upstreamFacts)
	files := weftDescriptors(t)
	weft := protofacts.Render(files, "io.linkerd.proxy.")
	tap := hasTap(files)
	if !tap {
		t.Log("tap.proto is not in the tree yet: its facts are the documented absence")
	}
	assert.Empty(t, compareSchemas(upstream, weft, tap))

	// The documented timestamp difference is really there, so the
	// exception above never hides anything else.
	assert.Contains(t, upstream, upstreamTimestampImport)
	assert.Contains(t, weft, weftTimestampImport)
}

func TestSchemaComparisonCatchesARenumberedField(t *testing.T) {
	upstream := readFacts(t, upstreamFacts)
	files := weftDescriptors(t)
	tap := hasTap(files)
	require.Empty(t, compareSchemas(upstream, protofacts.Render(files, "io.linkerd.proxy."), tap))

	// Renumber BalanceP2c.penalty_peak_ewma (3, v0.20) to 4 in a copy.
	renumbered := false
	for _, f := range files {
		if f.GetPackage() != "io.linkerd.proxy.outbound" {
			continue
		}
		for _, m := range f.GetMessageType() {
			if m.GetName() != "Backend" {
				continue
			}
			for _, n := range m.GetNestedType() {
				if n.GetName() != "BalanceP2c" {
					continue
				}
				for _, fd := range n.GetField() {
					if fd.GetName() == "penalty_peak_ewma" {
						fd.Number = proto.Int32(4)
						renumbered = true
					}
				}
			}
		}
	}
	require.True(t, renumbered)
	problems := compareSchemas(upstream, protofacts.Render(files, "io.linkerd.proxy."), tap)
	assert.Equal(t, []string{
		"upstream has, Weft lacks: field io.linkerd.proxy.outbound.Backend.BalanceP2c.penalty_peak_ewma = 3 singular .io.linkerd.proxy.outbound.Backend.BalanceP2c.PenaltyPeakEwma oneof load",
		"Weft has, upstream lacks: field io.linkerd.proxy.outbound.Backend.BalanceP2c.penalty_peak_ewma = 4 singular .io.linkerd.proxy.outbound.Backend.BalanceP2c.PenaltyPeakEwma oneof load",
	}, problems)
}

func TestTapFactsAreTheOnlyDocumentedAbsence(t *testing.T) {
	upstream := readFacts(t, upstreamFacts)
	var withoutTap []string
	for _, l := range upstream {
		if !tapFacts(l) {
			withoutTap = append(withoutTap, l)
		}
	}
	require.Less(t, len(withoutTap), len(upstream), "the table holds tap.proto's facts")
	assert.Empty(t, compareSchemas(upstream, withoutTap, false), "without tap.proto, its facts are excused")
	assert.NotEmpty(t, compareSchemas(upstream, withoutTap, true), "once tap.proto is present, each of its facts is checked")
	// A non-tap fact is never excused.
	assert.Equal(t, []string{"upstream has, Weft lacks: " + withoutTap[0]}, compareSchemas(upstream, withoutTap[1:], false))
}
