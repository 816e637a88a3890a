package routematch_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/internal/routematch"
)

func TestRepeatedValuesMatchAnyOutboundAndMustAgreeInbound(t *testing.T) {
	canary := routematch.HTTP{Headers: []routematch.Value{{Name: "x-canary", Exact: "1"}}}
	for _, c := range []struct {
		name        string
		lines       []string
		any, strict routematch.Outcome
	}{
		{"one value", []string{"1"}, routematch.Match, routematch.Match},
		{"absent", nil, routematch.NoMatch, routematch.NoMatch},
		{"two lines that disagree", []string{"1", "0"}, routematch.Match, routematch.Ambiguous},
		{"a list that disagrees", []string{"1, 0"}, routematch.NoMatch, routematch.Ambiguous},
		{"a list, even of equal values (the line itself differs)", []string{"1,1"}, routematch.NoMatch, routematch.Ambiguous},
		{"another value", []string{"0"}, routematch.NoMatch, routematch.NoMatch},
	} {
		req := &routematch.Request{Method: "GET", Path: "/", Header: http.Header{}}
		if c.lines != nil {
			req.Header["X-Canary"] = c.lines
		}
		m := routematch.New(req, routematch.AnyValue)
		_, got := m.HTTP(routematch.Rank{}, &canary)
		assert.Equal(t, c.any, got, "%s, any value", c.name)
		m = routematch.New(req, routematch.EveryValue)
		_, got = m.HTTP(routematch.Rank{}, &canary)
		assert.Equal(t, c.strict, got, "%s, every value", c.name)
	}
}

func TestAQueryThatDoesNotParseIsAmbiguousInboundOnly(t *testing.T) {
	v2 := routematch.HTTP{Query: []routematch.Value{{Name: "v", Exact: "2"}}}
	req := &routematch.Request{Method: "GET", Path: "/", RawQuery: "v=2&bad=%zz"}
	m := routematch.New(req, routematch.EveryValue)
	_, got := m.HTTP(routematch.Rank{}, &v2)
	assert.Equal(t, routematch.Ambiguous, got)
	m = routematch.New(req, routematch.AnyValue)
	_, got = m.HTTP(routematch.Rank{}, &v2)
	assert.Equal(t, routematch.Match, got, "outbound reads what parses, as net/url does")
}

func TestHugeRequestValuesSaturateTheRankInsteadOfWrapping(t *testing.T) {
	long := "/" + strings.Repeat("a", 1<<20)
	re := regexp.MustCompile(`^(?:/a*)$`)
	m := routematch.New(&routematch.Request{Method: "GET", Path: long}, routematch.EveryValue)
	regex, o := m.HTTP(routematch.Rank{}, &routematch.HTTP{Path: &routematch.Path{Kind: routematch.PathRegex, Value: re.String(), Regex: re}})
	assert.Equal(t, routematch.Match, o)
	root, o := m.HTTP(routematch.Rank{}, &routematch.HTTP{})
	assert.Equal(t, routematch.Match, o)
	assert.True(t, root.Less(regex), "a regex over a 1 MiB path still outranks the root prefix")
}

// FuzzMatcher feeds arbitrary request values to every kind of match: no
// panic, and an outcome that is one of the three.
func FuzzMatcher(f *testing.F) {
	f.Add("GET", "/items/42", "v=2", "api.shop.test:80", "1, 0")
	f.Add("POST", "/shop.Cart/Add", "", "[::1]:8080", "")
	f.Add("", "", "%", ":", ",,,")
	re := regexp.MustCompile(`^(?:/items/[0-9]+)$`)
	hosts := []routematch.Host{{Value: "shop.test", Suffix: true}, {Value: "api.shop.test."}}
	matches := []routematch.HTTP{
		{},
		{Path: &routematch.Path{Kind: routematch.PathExact, Value: "/items/42"}, Method: "GET"},
		{Path: &routematch.Path{Kind: routematch.PathPrefix, Value: "/items/"}, Query: []routematch.Value{{Name: "v", Exact: "2"}}},
		{Path: &routematch.Path{Kind: routematch.PathRegex, Value: re.String(), Regex: re}, Headers: []routematch.Value{{Name: "X-Canary", Regex: regexp.MustCompile(`^(?:1)$`)}}},
	}
	calls := []routematch.GRPC{{}, {Service: "shop.Cart"}, {Service: "shop.Cart", Method: "Add", Headers: []routematch.Value{{Name: "x-canary", Exact: "1"}}}}
	f.Fuzz(func(t *testing.T, method, path, query, host, header string) {
		req := &routematch.Request{Method: method, Path: path, RawQuery: query, Host: host, Header: http.Header{"X-Canary": {header}}}
		for _, mode := range []routematch.Values{routematch.AnyValue, routematch.EveryValue} {
			m := routematch.New(req, mode)
			h, _ := m.Host(hosts)
			for i := range matches {
				if _, o := m.HTTP(h, &matches[i]); o > routematch.Ambiguous {
					t.Fatalf("outcome %d", o)
				}
			}
			for i := range calls {
				if _, o := m.GRPC(h, &calls[i]); o > routematch.Ambiguous {
					t.Fatalf("outcome %d", o)
				}
			}
		}
	})
}
