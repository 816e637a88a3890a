package dnsname

import (
	"strings"
	"testing"
)

func TestLabel(t *testing.T) {
	for s, want := range map[string]bool{
		"web": true, "a": true, "web-2": true, "0web": true, strings.Repeat("a", 63): true,
		"": false, "-web": false, "web-": false, "Web": false, "web.shop": false, "web_2": false,
		strings.Repeat("a", 64): false, "wéb": false,
	} {
		if got := Label(s); got != want {
			t.Errorf("Label(%q) = %v, want %v", s, got, want)
		}
	}
}
