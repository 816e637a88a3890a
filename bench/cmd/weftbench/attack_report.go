package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The pure parts of `weftbench attack`: reading a process's memory from
// /proc/PID/status, summarizing a victim's samples, and the markdown table
// with its verdict. attack_report_test.go covers them.

// rssLimitKiB is the bound the issue sets on a proxy's resident memory
// during every attack (64 MiB), and maxP99Ratio the bound on a victim's p99
// latency under attack against its unattacked p99.
const (
	rssLimitKiB = 64 << 10
	maxP99Ratio = 2.0
)

// procMem is what the RSS sampler reads: VmRSS (resident now) and VmHWM
// (the resident peak since the process started), in KiB.
type procMem struct {
	RSSKiB, HWMKiB int64
}

// parseProcStatus reads VmRSS and VmHWM from the text of /proc/PID/status
// ("VmRSS:\t   19876 kB"). Both must be present.
func parseProcStatus(text string) (procMem, error) {
	var m procMem
	var seen int
	for line := range strings.Lines(text) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return procMem{}, fmt.Errorf("proc status: %s: want \"N kB\", got %q", key, strings.TrimSpace(rest))
		}
		v, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || v < 0 {
			return procMem{}, fmt.Errorf("proc status: %s: %q is not a size", key, fields[0])
		}
		if key == "VmRSS" {
			m.RSSKiB = v
			seen |= 1
		} else {
			m.HWMKiB = v
			seen |= 2
		}
	}
	if seen != 3 {
		return procMem{}, fmt.Errorf("proc status: VmRSS or VmHWM missing (a kernel thread or a process that exited)")
	}
	return m, nil
}

// readProcMem reads the memory of process pid.
func readProcMem(pid int) (procMem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, err
	}
	return parseProcStatus(string(b))
}

// rssSampler records the peak VmRSS (and the last VmHWM) of some
// processes, read every interval until stop is called.
type rssSampler struct {
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	peak     map[string]procMem
}

// sampleRSS starts sampling the processes named in pids every interval.
func sampleRSS(pids map[string]int, interval time.Duration) *rssSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &rssSampler{cancel: cancel, done: make(chan struct{}), peak: map[string]procMem{}}
	read := func() {
		for name, pid := range pids {
			m, err := readProcMem(pid)
			if err != nil {
				continue // exited: its last sample stands
			}
			s.mu.Lock()
			p := s.peak[name]
			p.RSSKiB = max(p.RSSKiB, m.RSSKiB)
			p.HWMKiB = max(p.HWMKiB, m.HWMKiB)
			s.peak[name] = p
			s.mu.Unlock()
		}
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			read()
			select {
			case <-ctx.Done():
				read()
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns each process's peaks.
func (s *rssSampler) stop() map[string]procMem {
	s.stopOnce.Do(s.cancel)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.peak)
}

// sample is one victim request (or tap): how long it took from its
// scheduled start, and whether it failed. A failure's latency is what it
// cost the victim (up to its timeout), so a stall shows in the p99.
type sample struct {
	lat time.Duration
	err bool
}

// latencyStats summarizes samples.
type latencyStats struct {
	N, Errors     int
	P50, P99, Max time.Duration
}

// summarize computes the percentiles of samples (nearest rank) over every
// sample, failed ones included.
func summarize(samples []sample) latencyStats {
	if len(samples) == 0 {
		return latencyStats{}
	}
	lat := make([]time.Duration, len(samples))
	st := latencyStats{N: len(samples)}
	for i, s := range samples {
		lat[i] = s.lat
		if s.err {
			st.Errors++
		}
	}
	slices.Sort(lat)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(lat))+0.999999) - 1
		return lat[min(max(i, 0), len(lat)-1)]
	}
	st.P50, st.P99, st.Max = rank(0.50), rank(0.99), lat[len(lat)-1]
	return st
}

// attackRow is one line of the table: one victim of one attack, its
// samples pooled over the rounds.
type attackRow struct {
	Attack, Victim string
	Base, Under    latencyStats
	// Proxies is the memory of each proxy that carried the attack:
	// its VmRSS before the first round (idle) and the peak VmRSS sampled
	// during the attack phases.
	Proxies []proxyMem
	// Skipped, when set, says why the row was not measured.
	Skipped string
}

type proxyMem struct {
	Name             string
	IdleKiB, PeakKiB int64
	HWMKiB           int64
}

// p99Ratio is the victim's p99 under attack over its unattacked p99 (0
// when there is no baseline).
func (r attackRow) p99Ratio() float64 {
	if r.Base.P99 <= 0 {
		return 0
	}
	return float64(r.Under.P99) / float64(r.Base.P99)
}

func (r attackRow) peakKiB() int64 {
	var p int64
	for _, m := range r.Proxies {
		p = max(p, m.PeakKiB, m.HWMKiB)
	}
	return p
}

// verdict is "met" when the victim's p99 under attack is within
// maxP99Ratio of its unattacked p99, it had no more errors under attack
// than without, and every proxy stayed under rssLimitKiB; otherwise it
// names what failed.
func (r attackRow) verdict() string {
	if r.Skipped != "" {
		return "not measured"
	}
	var why []string
	if r.Base.N == 0 || r.Under.N == 0 {
		why = append(why, "no samples")
	} else if ratio := r.p99Ratio(); ratio > maxP99Ratio {
		why = append(why, fmt.Sprintf("p99 %.1fx", ratio))
	}
	if r.Under.Errors > r.Base.Errors {
		why = append(why, fmt.Sprintf("%d errors", r.Under.Errors))
	}
	if p := r.peakKiB(); p >= rssLimitKiB {
		why = append(why, fmt.Sprintf("RSS %s MiB", mib(p)))
	}
	if len(why) == 0 {
		return "met"
	}
	return "**not met**: " + strings.Join(why, ", ")
}

func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// formatTable writes rows as the markdown table of the report.
func formatTable(rows []attackRow) string {
	var b strings.Builder
	b.WriteString("| attack | victim | p50 / p99 unattacked (ms) | p50 / p99 attacked (ms) | max attacked (ms) | p99 ratio | errors unattacked / attacked (of N) | proxy RSS idle → peak (MiB) | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | not measured: %s |\n", r.Attack, r.Victim, r.Skipped)
			continue
		}
		var mem []string
		for _, m := range r.Proxies {
			mem = append(mem, fmt.Sprintf("%s %s → %s", m.Name, mib(m.IdleKiB), mib(max(m.PeakKiB, m.HWMKiB))))
		}
		ratio := "–"
		if r.Base.P99 > 0 {
			ratio = strconv.FormatFloat(r.p99Ratio(), 'f', 2, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %s / %s | %s / %s | %s | %s | %d / %d (of %d) | %s | %s |\n",
			r.Attack, r.Victim, ms(r.Base.P50), ms(r.Base.P99), ms(r.Under.P50), ms(r.Under.P99), ms(r.Under.Max),
			ratio, r.Base.Errors, r.Under.Errors, r.Under.N, strings.Join(mem, "; "), r.verdict())
	}
	return b.String()
}

// firstLines returns up to n lines of a file, for error messages.
func firstLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < n {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines, "\n")
}
