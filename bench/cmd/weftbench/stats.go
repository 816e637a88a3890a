package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// latencySummary prints the line run.sh reads for an HTTP or gRPC load
// point: requests sent, successful, failed, achieved rate of successful
// requests, and latency percentiles in milliseconds over all requests.
func latencySummary(out io.Writer, lat []int64, ok, failed int, span time.Duration, extra string) error {
	if len(lat) == 0 {
		return errors.New("no requests recorded")
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(quantile(lat, q)) / 1e6 }
	rate := 0.0
	if span > 0 {
		rate = float64(ok) / span.Seconds()
	}
	fmt.Fprintf(out, "requests=%d ok=%d errors=%d rate=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f%s\n",
		len(lat), ok, failed, rate, ms(0.50), ms(0.99), ms(0.999), float64(lat[len(lat)-1])/1e6, extra)
	return nil
}

// runVegetaStats reads `vegeta encode --to csv`: timestamp (Unix ns),
// status code, latency (ns), then fields this does not need.
func runVegetaStats(_ context.Context, args []string, out io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: vegeta-stats FILE.csv")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	var lat []int64
	var ok, failed int
	var first, last int64
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		if len(rec) < 3 {
			return fmt.Errorf("%s line %d: want at least 3 fields, got %d", args[0], line, len(rec))
		}
		ts, err1 := strconv.ParseInt(rec[0], 10, 64)
		code, err2 := strconv.Atoi(rec[1])
		l, err3 := strconv.ParseInt(rec[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("%s line %d: %w", args[0], line, err)
		}
		if first == 0 || ts < first {
			first = ts
		}
		last = max(last, ts+l)
		lat = append(lat, l)
		if code >= 200 && code < 300 {
			ok++
		} else {
			failed++
		}
	}
	return latencySummary(out, lat, ok, failed, time.Duration(last-first), "")
}

// runGhzStats reads ghz's JSON report (-O json), whose details list every
// call with its start time, latency in nanoseconds, status and error.
//
// When its -z duration is up, ghz closes its connection under the calls
// still in flight; they fail with "client connection is closing" or
// "transport is closing" at the very end of the run. Those (ending within
// 100 ms of the last call's end) are counted as cut=N, not as errors, and
// left out of the percentiles. The same errors earlier in the run count.
func runGhzStats(_ context.Context, args []string, out io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: ghz-stats FILE.json")
	}
	raw, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var rep struct {
		Total   int64 `json:"total"` // ns
		Details []struct {
			Timestamp time.Time `json:"timestamp"`
			Latency   int64     `json:"latency"`
			Status    string    `json:"status"`
			Error     string    `json:"error"`
		} `json:"details"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	var end time.Time
	for _, d := range rep.Details {
		if e := d.Timestamp.Add(time.Duration(d.Latency)); e.After(end) {
			end = e
		}
	}
	var lat []int64
	var ok, failed, cut int
	for _, d := range rep.Details {
		if d.Status != "OK" && (strings.Contains(d.Error, "client connection is closing") || strings.Contains(d.Error, "transport is closing")) &&
			end.Sub(d.Timestamp.Add(time.Duration(d.Latency))) <= 100*time.Millisecond {
			cut++
			continue
		}
		lat = append(lat, d.Latency)
		if d.Status == "OK" {
			ok++
		} else {
			failed++
		}
	}
	return latencySummary(out, lat, ok, failed, time.Duration(rep.Total), fmt.Sprintf(" cut=%d", cut))
}
