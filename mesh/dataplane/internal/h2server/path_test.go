package h2server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// validRequestPath stands in for url.ParseRequestURI in checkRequest, so
// that the Stream API checks a request's path without building a URL.
// Both must give the same answer for every path checkRequest passes on
// ("/..." or "*").
func TestValidRequestPathAgreesWithParseRequestURI(t *testing.T) {
	for _, p := range []string{"/", "*", "/a?b", "/%41", "/%4", "/%zz", "/a%2", "/a?%zz", "/a\x7f", "/a\tb", "/a\x00", "//x/y", "/a#f", "/ü", "/a?", "/a??"} {
		_, err := url.ParseRequestURI(p)
		assert.Equal(t, err == nil, validRequestPath(p), "%q", p)
	}
}

func FuzzValidRequestPath(f *testing.F) {
	for _, p := range []string{"/", "*", "/a?b=%zz", "/%4", "/%41%2F", "/a\x7fb", "//x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if p != "*" && !strings.HasPrefix(p, "/") {
			return
		}
		_, err := url.ParseRequestURI(p)
		if got := validRequestPath(p); got != (err == nil) {
			t.Fatalf("%q: validRequestPath %v, ParseRequestURI error %v", p, got, err)
		}
	})
}
