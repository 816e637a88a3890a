package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/net/http2/hpack"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const procStatus = `Name:	weft-proxy
Umask:	0022
State:	S (sleeping)
VmPeak:	 1262436 kB
VmSize:	 1262436 kB
VmHWM:	  142336 kB
VmRSS:	   19876 kB
RssAnon:	    9120 kB
Threads:	8
`

func TestParseProcStatusReadsVmRSSAndVmHWM(t *testing.T) {
	m, err := parseProcStatus(procStatus)
	require.NoError(t, err)
	assert.Equal(t, procMem{RSSKiB: 19876, HWMKiB: 142336}, m)
}

func TestParseProcStatusRejectsMissingOrMalformedFields(t *testing.T) {
	for name, text := range map[string]string{
		"empty":            "",
		"kernel thread":    "Name:\tkthreadd\nState:\tS (sleeping)\n",
		"no VmHWM":         "VmRSS:\t 100 kB\n",
		"not a number":     "VmHWM:\t 1 kB\nVmRSS:\t lots kB\n",
		"negative":         "VmHWM:\t 1 kB\nVmRSS:\t -5 kB\n",
		"another unit":     "VmHWM:\t 1 kB\nVmRSS:\t 5 MB\n",
		"no unit":          "VmHWM:\t 1 kB\nVmRSS:\t 5\n",
		"extra field text": "VmHWM:\t 1 kB\nVmRSS:\t 5 kB x\n",
	} {
		_, err := parseProcStatus(text)
		assert.Error(t, err, name)
	}
}

func TestReadProcMemReadsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this system")
	}
	m, err := readProcMem(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, m.RSSKiB)
	assert.GreaterOrEqual(t, m.HWMKiB, m.RSSKiB)
}

func TestSummarizeCountsFailuresWithTheirLatency(t *testing.T) {
	var s []sample
	for i := 1; i <= 98; i++ {
		s = append(s, sample{lat: time.Duration(i) * time.Millisecond})
	}
	s = append(s, sample{lat: 5 * time.Second, err: true}, sample{lat: 5 * time.Second, err: true})
	st := summarize(s)
	assert.Equal(t, 100, st.N)
	assert.Equal(t, 2, st.Errors)
	assert.Equal(t, 50*time.Millisecond, st.P50)
	assert.Equal(t, 5*time.Second, st.P99, "the failed requests are the slowest 2%")
	assert.Equal(t, 5*time.Second, st.Max)
	assert.Equal(t, latencyStats{}, summarize(nil))
	assert.Equal(t, latencyStats{N: 1, P50: time.Millisecond, P99: time.Millisecond, Max: time.Millisecond}, summarize([]sample{{lat: time.Millisecond}}))
}

func row(baseP99, underP99 time.Duration, underErrors int, peakKiB int64) attackRow {
	return attackRow{
		Attack: "output-queue-peer", Victim: string(victimH2),
		Base:    latencyStats{N: 100, P50: time.Millisecond, P99: baseP99, Max: baseP99},
		Under:   latencyStats{N: 100, Errors: underErrors, P50: 2 * time.Millisecond, P99: underP99, Max: underP99},
		Proxies: []proxyMem{{Name: "weft-c", IdleKiB: 15 << 10, PeakKiB: 20 << 10}, {Name: "weft-s", IdleKiB: 15 << 10, PeakKiB: peakKiB}},
	}
}

func TestVerdictNamesEveryBoundMissed(t *testing.T) {
	assert.Equal(t, "met", row(10*time.Millisecond, 20*time.Millisecond, 0, 63<<10).verdict(), "2x and just under 64 MiB")
	assert.Equal(t, "**not met**: p99 2.1x", row(10*time.Millisecond, 21*time.Millisecond, 0, 20<<10).verdict())
	assert.Equal(t, "**not met**: RSS 64.0 MiB", row(10*time.Millisecond, 10*time.Millisecond, 0, 64<<10).verdict())
	assert.Equal(t, "**not met**: p99 500.0x, 7 errors, RSS 139.0 MiB",
		row(10*time.Millisecond, 5*time.Second, 7, 139<<10).verdict())

	hwm := row(10*time.Millisecond, 10*time.Millisecond, 0, 20<<10)
	hwm.Proxies[1].HWMKiB = 70 << 10
	assert.Equal(t, "**not met**: RSS 70.0 MiB", hwm.verdict(), "a peak between two samples still counts (VmHWM)")

	assert.Equal(t, "**not met**: no samples", attackRow{Proxies: []proxyMem{{Name: "weft-s"}}}.verdict())
	assert.Equal(t, "not measured", attackRow{Skipped: "why"}.verdict())
}

func TestFormatTableWritesOneLinePerVictim(t *testing.T) {
	got := formatTable([]attackRow{
		row(10*time.Millisecond, 15*time.Millisecond, 0, 30<<10),
		row(10*time.Millisecond, 5*time.Second, 3, 139<<10),
		{Attack: "transport-header", Victim: "–", Skipped: "not a latency attack"},
	})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, lines, 5)
	assert.True(t, strings.HasPrefix(lines[0], "| attack | victim | p50 / p99 unattacked (ms) |"))
	assert.Equal(t, strings.Count(lines[0], "|"), strings.Count(lines[1], "|"), "separator has a cell per column")
	assert.Equal(t, "| output-queue-peer | h2c GET | 1.00 / 10.00 | 2.00 / 15.00 | 15.00 | 1.50 | 0 / 0 (of 100) | weft-c 15.0 → 20.0; weft-s 15.0 → 30.0 | met |", lines[2])
	assert.Equal(t, "| output-queue-peer | h2c GET | 1.00 / 10.00 | 2.00 / 5000.00 | 5000.00 | 500.00 | 0 / 3 (of 100) | weft-c 15.0 → 20.0; weft-s 15.0 → 139.0 | **not met**: p99 500.0x, 3 errors, RSS 139.0 MiB |", lines[3])
	assert.Equal(t, "| transport-header | – | | | | | | | not measured: not a latency attack |", lines[4])
	for _, l := range lines[2:] {
		assert.Equal(t, strings.Count(lines[0], "|"), strings.Count(l, "|"), "cells in %q", l)
	}
}

func TestPickAttacksAcceptsNamesAndRejectsUnknownOnes(t *testing.T) {
	all, err := pickAttacks("all")
	require.NoError(t, err)
	assert.Len(t, all, len(attackSpecs()))
	two, err := pickAttacks("tap-slots, pool-trickle")
	require.NoError(t, err)
	require.Len(t, two, 2)
	assert.Equal(t, "tap-slots", two[0].name)
	assert.Equal(t, "pool-trickle", two[1].name)
	_, err = pickAttacks("tap-slots,nope")
	assert.ErrorContains(t, err, `unknown attack "nope"`)
}

func TestBudgetIsSharedAndSpent(t *testing.T) {
	b := newBudget(attackLimits{maxFrames: 10, window: time.Second})
	assert.True(t, b.take(4))
	assert.True(t, b.take(6))
	assert.False(t, b.take(1), "the eleventh frame is over the budget")
}

func TestHeaderBlockDecodesTheSameOnEveryStreamOfAConnection(t *testing.T) {
	block := headerBlock(":method", "GET", ":path", "/attack/oq", "x-bad", "a\x00b")
	// One decoder, as the server keeps one per connection: a block that
	// added to the dynamic table would decode differently the second time.
	dec := hpack.NewDecoder(4096, nil)
	first, err := dec.DecodeFull(block)
	require.NoError(t, err)
	second, err := dec.DecodeFull(block)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	require.Len(t, first, 3)
	assert.Equal(t, "a\x00b", first[2].Value)
}
