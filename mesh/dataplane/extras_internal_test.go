package dataplane

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAccessLogFieldsCannotForgeOrSplitLines(t *testing.T) {
	assert.Equal(t, "/plain?x=1", clean("/plain?x=1"))
	assert.Equal(t, `/a\x22\x20200\x0aforged`, clean("/a\" 200\nforged"))
	assert.Equal(t, `caf\xc3\xa9\x5c`, clean("café\\"))
}

func TestDetectAndConnectTimeoutsFollowTheDirection(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DetectTimeout = time.Second
	p := &Proxy{cfg: cfg}
	assert.Equal(t, time.Second, p.detectTimeout(Inbound))
	assert.Equal(t, time.Second, p.detectTimeout(Outbound))
	p.cfg.InboundDetectTimeout = time.Hour
	p.cfg.OutboundDetectTimeout = time.Minute
	assert.Equal(t, time.Hour, p.detectTimeout(Inbound))
	assert.Equal(t, time.Minute, p.detectTimeout(Outbound))

	p.cfg.ConnectTimeout = 2 * time.Second
	p.cfg.InboundConnectTimeout = 100 * time.Millisecond
	in := withInfo(&connInfo{direction: Inbound})
	out := withInfo(&connInfo{direction: Outbound})
	assert.Equal(t, 100*time.Millisecond, p.connectTimeout(in))
	assert.Equal(t, 2*time.Second, p.connectTimeout(out))
}

func withInfo(info *connInfo) context.Context {
	return context.WithValue(context.Background(), infoKey{}, info)
}

func TestAccessLogJSONStringsRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", `a"b\c`, "tab\there\nnew", "caf\u00e9 \u2603", "\xff\xfebad", "\x00\x1f\x7f", "<script>&"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, b, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if s == "\xff\xfebad" {
			want = "\ufffd\ufffdbad"
		}
		assert.Equal(t, want, got, "%q", s)
	}
}
