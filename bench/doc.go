// Package bench holds Weft's whole-process benchmark harness; it has no Go
// API. Everything is driven by one script:
//
//	bench/run.sh            # full run, about 10 minutes
//	bench/run.sh --quick    # smoke run, 2 s per load point
//
// The script builds cmd/weft-proxy and bench/cmd/weftbench (the load tools,
// the echo and HTTP/gRPC backends, the PKI generator and a plain Go
// httputil.ReverseProxy), starts each contender on 127.0.0.1 (the Weft
// proxy pair with mutual TLS, an HAProxy pair and an NGINX pair speaking
// TLS to each other, the Go ReverseProxy pair, and direct connections),
// loads them one after the other with bounded runs, reads each proxy's
// memory and CPU time from /proc, and writes a markdown table to stdout and
// to bench/results/. The configuration templates are in bench/conf. The
// figures and their reading are in docs/benchmarks.md.
//
// bench/attack.sh (weftbench attack) measures a victim's latency and the
// proxies' memory while hostile clients attack a real weft-proxy pair
// (issue 27): output-queue and reset floods, zero-window streams on a
// shared connection, trickling uploads, tap-slot holders and a PING flood
// over TLS, each bounded in frames, connections and time.
//
// bench_test.go runs the quick layer-4 part when WEFT_BENCH=1 is set, so
// that the script is known to still work; benchmarks never run in CI.
package bench
