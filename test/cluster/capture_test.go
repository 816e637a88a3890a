//go:build clusterintegration

package cluster_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/weftmesh/weft/internal/tools/cluster"
)

// A packet capture inside the node's network namespace: an AF_PACKET
// socket on every interface there (the bridge and each pod's veth), which
// sees every frame between pods. It keeps the TCP payloads of pod-to-pod
// flows (the node's own address on the bridge excluded), at most
// captureLimit bytes.
const captureLimit = 64 << 20

type flow struct {
	src, dst netip.AddrPort
}

func (f flow) String() string { return f.src.String() + "->" + f.dst.String() }

type capture struct {
	fd      int
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	flows   map[flow]map[uint32][]byte
	bytes   int
	frames  int
	readErr error
}

var (
	podNet  = netip.MustParsePrefix(cluster.PodCIDR)
	gateway = netip.MustParseAddr("10.244.0.1") // the bridge's address: the node itself
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (e *env) startCapture(t *testing.T) *capture {
	t.Helper()
	c := &capture{stop: make(chan struct{}), done: make(chan struct{}), flows: map[flow]map[uint32][]byte{}}
	err := e.state.InNodeNetwork(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		c.fd = fd
		return nil
	})
	require.NoError(t, err, "AF_PACKET socket in the node's network namespace")
	require.NoError(t, unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20))
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	require.NoError(t, unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv))
	go c.run()
	t.Cleanup(func() { c.finish() })
	return c
}

func (c *capture) run() {
	defer close(c.done)
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			c.mu.Lock()
			c.readErr = err
			c.mu.Unlock()
			return
		}
		c.add(buf[:n])
	}
}

// add keeps the TCP payload of an Ethernet frame between two pods.
func (c *capture) add(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames++
	if len(frame) < 14+20 || binary.BigEndian.Uint16(frame[12:14]) != 0x0800 {
		return
	}
	ip := frame[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl || ip[9] != 6 {
		return
	}
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total < ihl || total > len(ip) {
		return
	}
	src, _ := netip.AddrFromSlice(ip[12:16])
	dst, _ := netip.AddrFromSlice(ip[16:20])
	if !podNet.Contains(src) || !podNet.Contains(dst) || src == gateway || dst == gateway {
		return
	}
	tcp := ip[ihl:total]
	if len(tcp) < 20 {
		return
	}
	off := int(tcp[12]>>4) * 4
	if off < 20 || off > len(tcp) {
		return
	}
	payload := tcp[off:]
	if len(payload) == 0 || c.bytes+len(payload) > captureLimit {
		return
	}
	f := flow{netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:2])), netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:4]))}
	seq := binary.BigEndian.Uint32(tcp[4:8])
	segs := c.flows[f]
	if segs == nil {
		segs = map[uint32][]byte{}
		c.flows[f] = segs
	}
	if _, seen := segs[seq]; seen { // the same frame on the next interface
		return
	}
	segs[seq] = bytes.Clone(payload)
	c.bytes += len(payload)
}

func (c *capture) finish() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	if c.fd != 0 {
		_ = unix.Close(c.fd)
		c.fd = 0
	}
}

// streams stops the capture and returns each pod-to-pod flow's payload,
// segments in sequence order.
func (c *capture) streams(t *testing.T) map[flow][]byte {
	t.Helper()
	c.finish()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NoError(t, c.readErr, "packet capture")
	out := map[flow][]byte{}
	for f, segs := range c.flows {
		seqs := make([]uint32, 0, len(segs))
		for s := range segs {
			seqs = append(seqs, s)
		}
		// The flows are short: their sequence numbers do not wrap.
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		var b []byte
		for _, s := range seqs {
			b = append(b, segs[s]...)
		}
		out[f] = b
	}
	t.Logf("capture: %d frames, %d pod-to-pod TCP flows, %d payload bytes", c.frames, len(out), c.bytes)
	return out
}

// isTLSRecord reports whether b starts with a TLS handshake record.
func isTLSRecord(b []byte) bool {
	return len(b) >= 5 && b[0] == 0x16 && b[1] == 0x03
}

func describe(f flow, b []byte) string {
	n := min(len(b), 48)
	return fmt.Sprintf("%s: %d bytes, starting %q", f, len(b), b[:n])
}
