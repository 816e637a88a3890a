package accesslog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestApacheFieldsCannotForgeOrSplitLines(t *testing.T) {
	assert.Equal(t, "/plain?x=1", clean("/plain?x=1"))
	assert.Equal(t, `/a\x22\x20200\x0aforged`, clean("/a\" 200\nforged"))
	assert.Equal(t, `caf\xc3\xa9\x5c`, clean("café\\"))
	assert.Equal(t, `\x00\x1b[31m\x7f\xff`, clean("\x00\x1b[31m\x7f\xff"))
	assert.Empty(t, clean(""))
}

func TestJSONStringsRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", `a"b\c`, "tab\there\nnew", "caf\u00e9 \u2603", "\xff\xfebad", "\x00\x1f\x7f", "<script>&", "\u2028\u2029", "\xed\xa0\x80"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, b, err)
		}
		// Each invalid byte becomes one U+FFFD, as a []rune conversion
		// does it.
		assert.Equal(t, string([]rune(s)), got, "%q", s)
		assert.NotContains(t, string(b[1:len(b)-1]), "\n", "%q", s)
	}
}
