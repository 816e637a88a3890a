package l4

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDetectAndConnectTimeoutsFollowTheDirection(t *testing.T) {
	p := &Paths{cfg: Config{DetectTimeout: time.Second, ConnectTimeout: time.Second}}
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
