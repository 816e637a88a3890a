package pathnorm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

func TestNormalizeProducesOneFormForEquivalentPaths(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"/admin", "/admin"},
		{"/admin/", "/admin/"},
		{"//admin", "/admin"},
		{"/a//b///c", "/a/b/c"},
		{"/public/../admin", "/admin"},
		{"/public/./../admin", "/admin"},
		{"/./admin", "/admin"},
		{"/../admin", "/admin"},
		{"/../../..", "/"},
		{"/a/b/..", "/a/"},
		{"/a/b/.", "/a/b/"},
		{"/a/b/../", "/a/"},
		{"/%2e%2e/admin", "/admin"},
		{"/%2E%2e/admin", "/admin"},
		{"/public/%2e%2e/admin", "/admin"},
		{"/.%2e/admin", "/admin"},
		{"/%61dmin", "/admin"},
		{"/%7euser", "/~user"},
		{"/a%3bb", "/a%3Bb"},
		{"/%252e%252e/admin", "/%252e%252e/admin"},
		{"/a b", "/a%20b"},
		{"/caf\xc3\xa9", "/caf%C3%A9"},
		{"/admin;x=1", "/admin;x=1"},
		{"/ADMIN", "/ADMIN"},
		{"/a/...", "/a/..."},
		{"/a/..b", "/a/..b"},
		{"/a:b@c!$&'()*+,=", "/a:b@c!$&'()*+,="},
	}
	for _, c := range cases {
		got, err := pathnorm.Normalize(c.in)
		if assert.NoError(t, err, c.in) {
			assert.Equal(t, c.want, got, "Normalize(%q)", c.in)
		}
	}
}

func TestNormalizeRefusesAmbiguousPaths(t *testing.T) {
	cases := []struct{ in, reason string }{
		{"/admin%2F", pathnorm.ReasonEncodedSlash},
		{"/admin%2f..%2fsecret", pathnorm.ReasonEncodedSlash},
		{"/a%5Cb", pathnorm.ReasonEncodedSlash},
		{"/a\\b", pathnorm.ReasonBackslash},
		{"\\admin", pathnorm.ReasonNotAbsolute},
		{"/admin#f", pathnorm.ReasonFragment},
		{"/admin?x=1", pathnorm.ReasonQuery},
		{"/..;/admin", pathnorm.ReasonDotParams},
		{"/.;x/admin", pathnorm.ReasonDotParams},
		{"/public/..;jsessionid=1/admin", pathnorm.ReasonDotParams},
		{"/%2e%2e;/admin", pathnorm.ReasonDotParams},
		{"/admin%00", pathnorm.ReasonControl},
		{"/admin\x00", pathnorm.ReasonControl},
		{"/a%0d%0ab", pathnorm.ReasonControl},
		{"/a%7f", pathnorm.ReasonControl},
		{"/a%", pathnorm.ReasonBadEncoding},
		{"/a%4", pathnorm.ReasonBadEncoding},
		{"/a%zz", pathnorm.ReasonBadEncoding},
		{"admin", pathnorm.ReasonNotAbsolute},
		{"*", pathnorm.ReasonNotAbsolute},
		{"/" + strings.Repeat("a", pathnorm.MaxLength), pathnorm.ReasonTooLong},
	}
	for _, c := range cases {
		got, err := pathnorm.Normalize(c.in)
		require.Error(t, err, "Normalize(%q) = %q", c.in, got)
		assert.True(t, errors.Is(err, pathnorm.ErrInvalid), c.in)
		var pe *pathnorm.Error
		if assert.True(t, errors.As(err, &pe), c.in) {
			assert.Equal(t, c.reason, pe.Reason, c.in)
		}
		assert.Empty(t, got)
	}
}

func TestNormalizeOfNormalPathDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = pathnorm.Normalize("/api/v1/items/42;rev=3")
	})
	assert.Zero(t, allocs)
}

func TestSplitTargetSeparatesQueryAndRefusesFragments(t *testing.T) {
	p, q, err := pathnorm.SplitTarget("/a/b?x=1&y=%2F")
	require.NoError(t, err)
	assert.Equal(t, "/a/b", p)
	assert.Equal(t, "x=1&y=%2F", q)

	p, q, err = pathnorm.SplitTarget("/a")
	require.NoError(t, err)
	assert.Equal(t, "/a", p)
	assert.Empty(t, q)

	_, _, err = pathnorm.SplitTarget("/a?x#frag")
	assert.ErrorIs(t, err, pathnorm.ErrInvalid)
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"/", "/public/../admin", "//admin", "/%2e%2e/admin", "/admin%2F", "/..;/admin",
		"/a/./b/../c/", "/%61dmin", "/%252e", "/a b", "/\xff", "/a;b/..;c", "/.%2E/", "/~%7E",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := pathnorm.Normalize(in)
		if err != nil {
			if !errors.Is(err, pathnorm.ErrInvalid) {
				t.Fatalf("Normalize(%q): error %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		again, err := pathnorm.Normalize(out)
		if err != nil {
			t.Fatalf("Normalize(%q) = %q, which does not normalize again: %v", in, out, err)
		}
		if again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") {
			t.Fatalf("Normalize(%q) = %q: not a clean absolute path", in, out)
		}
		for _, seg := range strings.Split(out, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("Normalize(%q) = %q keeps a dot segment", in, out)
			}
		}
	})
}

func BenchmarkNormalize(b *testing.B) {
	for _, p := range []string{"/api/v1/items/42", "/public/..//api/./items/%34%32"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pathnorm.Normalize(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
