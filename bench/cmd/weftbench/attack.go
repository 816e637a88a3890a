package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// `weftbench attack`: the proxy under the hostile peers of issue 27,
// measured from outside. For each attack it starts a fresh pair of real
// weft-proxy processes per round, measures victims through them without
// the attack, then with the attack running, samples the proxies' memory
// every 50 ms meanwhile, and writes a markdown table with a verdict per
// victim: p99 under attack within 2x of unattacked, no more victim errors
// than unattacked, and every proxy under 64 MiB resident.

// attackSpec is one attack of the table.
type attackSpec struct {
	name    string
	summary string
	victims []victimKind
	// run attacks until ctx ends, sending at most lim.maxFrames HTTP/2
	// frames where it sends frames, and says what it did.
	run func(ctx context.Context, e *attackEnv, lim attackLimits) string
	// skip, when set, is why the attack is listed but not measured.
	skip string
	// countsAppRequests: the report counts the attack's requests that
	// reached the application (which the parent process serves).
	countsAppRequests bool
}

func attackSpecs() []attackSpec {
	return []attackSpec{
		{name: "output-queue-outbound", summary: "finding 1: h2c client of the client proxy's outbound port (the local application) that never reads, HEADERS with a NUL in a field value on stream after stream",
			victims: []victimKind{victimH2}, run: outputQueueAttack(viaOutbound)},
		{name: "output-queue-peer", summary: "finding 1 over mesh TLS: a meshed peer (attacker identity, transport header) to the server proxy's inbound port, same frames",
			victims: []victimKind{victimH2}, run: outputQueueAttack(viaPeer)},
		{name: "made-you-reset-outbound", summary: "finding 2: non-reading h2c client, a valid GET then WINDOW_UPDATE increment 0 on each stream (the server must reset it)",
			victims: []victimKind{victimH2}, run: madeYouResetAttack(viaOutbound), countsAppRequests: true},
		{name: "jam-only-outbound", summary: "control for made-you-reset-outbound: its first step alone, no flood (one 8 MiB response never read, the connection held 1 s, then a new one: about as many connections as the flood opens)",
			victims: []victimKind{victimH2}, run: jamOnlyAttack(viaOutbound, time.Second)},
		{name: "made-you-reset-peer", summary: "finding 2 over mesh TLS from a meshed peer",
			victims: []victimKind{victimH2}, run: madeYouResetAttack(viaPeer), countsAppRequests: true},
		{name: "zero-window-6x2MiB", summary: "finding 3: h2c client of the client proxy with SETTINGS_INITIAL_WINDOW_SIZE 0 asking for 6 responses of 2 MiB; victims share the pooled HTTP/2 connections to the server proxy and the application",
			victims: []victimKind{victimH2Big, victimGRPC}, run: zeroWindowAttack(viaOutbound, 6, 2<<20)},
		{name: "zero-window-60x100kB", summary: "finding 3: the same with 60 responses of 100 kB",
			victims: []victimKind{victimH2Big, victimGRPC}, run: zeroWindowAttack(viaOutbound, 60, 100_000)},
		{name: "zero-window-peer-6x2MiB", summary: "finding 3 from a meshed peer: the same client over mesh TLS to the server proxy's inbound port, sharing the server proxy's pooled connection to the application with the victims",
			victims: []victimKind{victimH2Big, victimGRPC}, run: zeroWindowAttack(viaPeer, 6, 2<<20)},
		{name: "pool-trickle", summary: "finding 4: 72 chunked HTTP/1.1 uploads through the client proxy, a 1-byte chunk every 2 s each, holding its HTTP/1.1 pool to the server proxy",
			victims: []victimKind{victimH1}, run: poolTrickleAttack(72)},
		{name: "tap-slots", summary: "finding 5: 80 silent TCP connections and 16 idle mTLS connections (non-tapper identity) to the server proxy's tap port, each reopened when closed",
			victims: []victimKind{victimTapper}, run: tapSlotsAttack(80, 16)},
		{name: "ping-flood-tls", summary: "finding 6: a meshed peer over mesh TLS sending one PING per TLS record, reading the acks",
			victims: []victimKind{victimH2}, run: pingFloodAttack()},
		{name: "transport-header", summary: "finding 7: a peer's transport header reaching other loopback ports",
			victims: []victimKind{"–"}, skip: "not a latency or memory attack (where a transport header may point is a policy question, covered by the regression test)"},
	}
}

// runAttackCmd is `weftbench attack`.
func runAttackCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("attack", flag.ContinueOnError)
	which := fs.String("attack", "all", "attacks to run, comma-separated, or all: "+strings.Join(attackNames(), ", "))
	dur := fs.Duration("duration", 10*time.Second, "victim measure per phase (unattacked and attacked)")
	rounds := fs.Int("rounds", 3, "rounds of (unattacked, attacked), each on fresh proxies")
	rate := fs.Int("rate", 200, "requests per second of each request victim")
	lead := fs.Duration("lead", time.Second, "how long an attack runs before its victims start")
	maxFrames := fs.Int64("max-frames", 2_500_000, "HTTP/2 frames an attacker may send in one attack phase")
	proxyBin := fs.String("proxy-bin", "", "weft-proxy binary (required; bench/attack.sh builds it)")
	outFile := fs.String("out", "", "also write the report to this file")
	keep := fs.Bool("keep", false, "keep the work directory (proxy logs, PKI, static files)")
	attackerSrc := fs.String("attacker-source", "127.0.0.2", "loopback source address of the attackers' connections (the victims use 127.0.0.1)")
	inProcess := fs.Bool("attacker-in-process", false, "run each attacker as goroutines of this process, beside the victims and the application, instead of in a child process (how runs before 2026-12-06 measured)")
	attackerCPUs := fs.String("attacker-cpus", "", "run the attacker process under `taskset -c LIST` (e.g. 1; run this process under taskset on the other CPUs)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case *proxyBin == "":
		return errors.New("-proxy-bin is required (go build -o DIR/weft-proxy ./cmd/weft-proxy, or use bench/attack.sh)")
	case *dur < time.Second || *dur > 2*time.Minute:
		return errors.New("-duration must be 1s..2m")
	case *rounds < 1 || *rounds > 9:
		return errors.New("-rounds must be 1..9")
	case *rate < 1 || *rate > 5000:
		return errors.New("-rate must be 1..5000")
	case *lead < 0 || *lead > 30*time.Second:
		return errors.New("-lead must be 0..30s")
	case *maxFrames < 1 || *maxFrames > 50_000_000:
		return errors.New("-max-frames must be 1..50000000")
	case *inProcess && *attackerCPUs != "":
		return errors.New("-attacker-cpus needs the attacker in a process of its own (drop -attacker-in-process)")
	case strings.Trim(*attackerCPUs, "0123456789,-") != "":
		return fmt.Errorf("-attacker-cpus %q: want a CPU list such as 1 or 2-3", *attackerCPUs)
	}
	src := net.ParseIP(*attackerSrc)
	if src == nil || !src.IsLoopback() {
		return fmt.Errorf("-attacker-source %q: want a loopback address", *attackerSrc)
	}
	specs, err := pickAttacks(*which)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "weft-attack-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "work directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	e, err := newAttackEnv(dir, *proxyBin, src)
	if err != nil {
		return err
	}
	defer e.stopApp()
	e.childAttacker, e.attackerCPUs = !*inProcess, *attackerCPUs
	if err := e.saveState(); err != nil {
		return err
	}

	load := []string{"start: " + loadAvg()}
	var rows []attackRow
	var notes []string
	for _, a := range specs {
		if a.skip != "" {
			rows = append(rows, attackRow{Attack: a.name, Victim: string(a.victims[0]), Skipped: a.skip})
			continue
		}
		fmt.Fprintf(os.Stderr, "[%s] %s: %d round(s) of %s unattacked + %s attacked\n", time.Now().Format(time.TimeOnly), a.name, *rounds, *dur, *dur)
		r, n, err := measureAttack(ctx, e, a, *rounds, *rate, *dur, *lead, *maxFrames)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, k := range a.victims {
				rows = append(rows, attackRow{Attack: a.name, Victim: string(k), Skipped: "failed: " + oneLine(err.Error())})
			}
			continue
		}
		rows = append(rows, r...)
		notes = append(notes, fmt.Sprintf("- **%s** (%s): %s", a.name, a.summary, strings.Join(n, "; ")))
	}
	load = append(load, "end: "+loadAvg())

	var b strings.Builder
	fmt.Fprintf(&b, "## Victims under attack (weftbench attack), %s\n\n", time.Now().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "```sh\nweftbench attack %s\n```\n\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "Machine: %d CPUs, %s/%s, %s; load average (1, 5, 15 min) %s.\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.Join(load, ", "))
	fmt.Fprintf(&b, "Per round, on fresh proxies: victims %s unattacked, then the attack (started %s before them) and the victims %s; %d round(s), samples pooled. Request victims: %d req/s each, open loop, %s timeout (a failed request counts with the time it took). RSS: VmRSS of each proxy every 50 ms during the attack phase, and VmHWM; \"idle\" is VmRSS before the first round. Verdict: p99 attacked ≤ %.0fx unattacked, no more errors than unattacked, every proxy < %d MiB.\n\n",
		*dur, *lead, *dur, *rounds, *rate, victimTimeout, maxP99Ratio, rssLimitKiB>>10)
	b.WriteString(formatTable(rows))
	b.WriteString("\nWhat each attacker did, per round:\n\n")
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	if *outFile != "" {
		if err := os.MkdirAll(filepath.Dir(*outFile), 0o755); err != nil {
			return err
		}
		return os.WriteFile(*outFile, []byte(b.String()), 0o644)
	}
	return nil
}

func attackNames() []string {
	var n []string
	for _, a := range attackSpecs() {
		n = append(n, a.name)
	}
	return n
}

func pickAttacks(which string) ([]attackSpec, error) {
	all := attackSpecs()
	if which == "all" {
		return all, nil
	}
	var out []attackSpec
	for _, name := range strings.Split(which, ",") {
		i := slices.IndexFunc(all, func(a attackSpec) bool { return a.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-attack: unknown attack %q (known: %s)", name, strings.Join(attackNames(), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// measureAttack runs the rounds of one attack and returns a row per
// victim and what the attacker did in each round.
func measureAttack(ctx context.Context, e *attackEnv, a attackSpec, rounds, rate int, dur, lead time.Duration, maxFrames int64) ([]attackRow, []string, error) {
	base := map[victimKind][]sample{}
	under := map[victimKind][]sample{}
	mem := map[string]*proxyMem{}
	var notes []string
	for r := 1; r <= rounds; r++ {
		s, c, err := e.startProxies()
		if err != nil {
			return nil, nil, err
		}
		note, err := attackRound(ctx, e, a, s, c, rate, dur, lead, maxFrames, base, under, mem)
		c.stop()
		s.stop()
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, fmt.Sprintf("round %d: %s", r, note))
	}
	var rows []attackRow
	for _, k := range a.victims {
		row := attackRow{Attack: a.name, Victim: string(k), Base: summarize(base[k]), Under: summarize(under[k])}
		for _, n := range []string{"weft-c", "weft-s"} {
			if m := mem[n]; m != nil {
				row.Proxies = append(row.Proxies, *m)
			}
		}
		rows = append(rows, row)
	}
	return rows, notes, nil
}

func attackRound(ctx context.Context, e *attackEnv, a attackSpec, s, c *proxyProc, rate int, dur, lead time.Duration, maxFrames int64,
	base, under map[victimKind][]sample, mem map[string]*proxyMem) (string, error) {
	v, err := newVictims(e)
	if err != nil {
		return "", err
	}
	defer v.close()
	if err := v.warm(ctx, a.victims); err != nil {
		return "", fmt.Errorf("victims cannot reach the application through the proxies: %w", err)
	}
	pids := map[string]int{"weft-s": s.pid(), "weft-c": c.pid()}
	for n, pid := range pids {
		if mem[n] == nil {
			m, err := readProcMem(pid)
			if err != nil {
				return "", err
			}
			mem[n] = &proxyMem{Name: n, IdleKiB: m.RSSKiB}
		}
	}
	samples, errs := v.run(ctx, a.victims, rate, dur)
	for k, ss := range samples {
		base[k] = append(base[k], ss...)
	}
	var note string
	for _, k := range a.victims {
		if m := errs[k]; m != "" {
			note += fmt.Sprintf("; %s unattacked, first error: %s", k, oneLine(m))
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}

	sampler := sampleRSS(pids, 50*time.Millisecond)
	actx, cancel := context.WithTimeout(ctx, lead+dur+victimTimeout+tapTimeout)
	done := make(chan string, 1)
	go func() {
		if e.childAttacker {
			done <- e.attackInChild(actx, a, lead+dur, maxFrames)
			return
		}
		done <- a.run(actx, e, attackLimits{maxFrames: maxFrames, window: lead + dur})
	}()
	var attackedErrs map[victimKind]string
	if sleepCtx(ctx, lead) == nil {
		samples, attackedErrs = v.run(ctx, a.victims, rate, dur)
		for k, ss := range samples {
			under[k] = append(under[k], ss...)
		}
	}
	cancel()
	note = <-done + note
	for _, k := range a.victims {
		if m := attackedErrs[k]; m != "" {
			note += fmt.Sprintf("; %s attacked, first error: %s", k, oneLine(m))
		}
	}
	for n, p := range sampler.stop() {
		mem[n].PeakKiB = max(mem[n].PeakKiB, p.RSSKiB)
		mem[n].HWMKiB = max(mem[n].HWMKiB, p.HWMKiB)
	}
	for _, p := range []*proxyProc{s, c} {
		select {
		case <-p.done:
			note += fmt.Sprintf("; %s EXITED during the attack (log: %s)", p.name, oneLine(firstLines(p.log, 5)))
		default:
		}
	}
	return note, ctx.Err()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
