// Command weftbench holds the small programs bench/run.sh needs: a run-time
// PKI, a TCP echo server and three TCP load clients (throughput, connection
// rate, echo latency), a holder of idle connections, an HTTP and gRPC
// backend, a plain Go httputil.ReverseProxy (the "obvious Go proxy"
// baseline), parsers that turn vegeta and ghz output into percentiles, and
// the attack benchmark (attack.go): victims' latency and the proxies'
// memory while hostile clients attack a real weft-proxy pair (issue 27).
//
// Every load client is bounded in time and count, dials only the address it
// is given (run.sh gives only 127.0.0.1), and prints one line of key=value
// pairs that the script reads. Servers print "ready" once listening and
// stop on SIGINT or SIGTERM.
//
//	weftbench pki -out DIR -name client=ID -name server=ID
//	weftbench echo -listen 127.0.0.1:7000
//	weftbench tput -addr 127.0.0.1:7000 -conns 16 -duration 10s
//	weftbench connrate -addr 127.0.0.1:7000 -workers 8 -duration 10s
//	weftbench latency -addr 127.0.0.1:7000 -duration 10s
//	weftbench idle -addr 127.0.0.1:7000 -conns 1000 -hold 60s
//	weftbench backend -http 127.0.0.1:8080 -grpc 127.0.0.1:8090
//	weftbench goproxy -listen ... -to URL [TLS flags]
//	weftbench vegeta-stats FILE.csv
//	weftbench ghz-stats FILE.json
//	weftbench attack -proxy-bin PATH [-attack NAME,...|all] [-duration 10s] [-rounds 3] [-out FILE] [-attacker-cpus LIST]
//	weftbench attack-client -env DIR -attack NAME -window D (started by attack)
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, out io.Writer) error
}

var commands = map[string]command{
	"pki":           {"write an anchor, an issuer and leaf certificates", runPKI},
	"echo":          {"TCP echo server", runEcho},
	"tput":          {"echo throughput over N connections", runTput},
	"connrate":      {"new connections per second (connect, 1-byte echo, close)", runConnRate},
	"latency":       {"small-message echo latency on one connection", runLatency},
	"idle":          {"open N connections, echo once on each, hold them", runIdle},
	"backend":       {"HTTP/1.1 + h2c backend and gRPC health backend", runBackend},
	"goproxy":       {"httputil.ReverseProxy with optional TLS on either side", runGoProxy},
	"vegeta-stats":  {"percentiles and rates from `vegeta encode --to csv` output", runVegetaStats},
	"ghz-stats":     {"percentiles and rates from ghz -O json output", runGhzStats},
	"attack":        {"victims' latency and proxy memory under hostile clients (issue 27)", runAttackCmd},
	"attack-client": {"one attack phase, as `weftbench attack` runs it in a child process", runAttackClientCmd},
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]].run == nil {
		fmt.Fprintln(os.Stderr, "usage: weftbench COMMAND [flags]")
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(os.Stderr, "  %-13s %s\n", n, commands[n].summary)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands[os.Args[1]].run(ctx, os.Args[2:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "weftbench %s: %v\n", os.Args[1], err)
		stop()
		os.Exit(1)
	}
}
