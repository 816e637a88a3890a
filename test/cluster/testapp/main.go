// Command testapp is the application the cluster suite meshes: one small
// program that is, by its flags, a backend (HTTP and a TCP echo), a
// frontend (HTTP that calls an upstream) and a caller the test drives.
//
//	testapp --name backend  [--http :8080] [--tcp :9090] [--tls :9443]
//	testapp --name frontend --upstream http://backend:8080
//	testapp --name client   (every instance also serves the control port)
//	testapp --name api --grpc :8090 --fail-every 4       (grpc.go: the demo's gRPC backend)
//	testapp --name web --grpc-upstream api:8090           (HTTP/1.1 frontend calling it)
//	testapp --name load --load http://web:8080/unary,http://web:8080/empty --load-interval 100ms
//	testapp --name collector --otlp :4317       (collector.go: an OTLP trace collector)
//
// Every instance serves, on --control (:8081), the endpoints the test uses
// to make calls from inside the pod (through its proxy):
//
//	GET /call?url=U&n=N&interval=D&marker=M   N sequential GETs, counted
//	    [&header=Name:Value ...]              request headers to send (at most 10)
//	    [&show=Name ...]                      response headers to report (the last response's)
//	GET /load/start?url=U&interval=D&marker=M a background loop (one at a time, at most 10 minutes)
//	GET /load/stop                            stops it and returns its counts
//	GET /tcp?addr=A&payload=P                 one TCP exchange with an echo server
//	GET /tls?addr=A&sni=S&payload=P           the same over TLS with server name S (not verified)
//	GET /load/counts                          the counts of the --load loop so far
//	GET /spans?trace=T                        with --otlp: the spans received (of trace T)
//
// Requests carry the marker in a header and in the path, and backends echo
// it in their bodies, so a packet capture can look for it. A backend
// answers the traceparent header it received in X-Received-Traceparent,
// so the suite can see the parent span its proxy gave it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weftmesh/weft/internal/testutil/otlptest"
)

const (
	maxCalls    = 100000
	maxLoad     = 10 * time.Minute
	callTimeout = 5 * time.Second
	keepErrors  = 10
)

func main() {
	name := flag.String("name", "testapp", "name answered in every response")
	httpAddr := flag.String("http", ":8080", "HTTP service address (empty: none)")
	tcpAddr := flag.String("tcp", ":9090", "TCP echo address (empty: none)")
	tlsAddr := flag.String("tls", ":9443", "TLS echo address, a self-signed certificate (empty: none)")
	control := flag.String("control", ":8081", "control address (empty: none)")
	upstream := flag.String("upstream", "", "URL each HTTP request is passed on to")
	drain := flag.Duration("drain", 5*time.Second, "after SIGTERM, serve on this long before stopping")
	grpcAddr := flag.String("grpc", "", "gRPC address of the test service (empty: none)")
	failEvery := flag.Int("fail-every", 0, "with --grpc: UnaryCall fails with INTERNAL on every Nth call (0: never)")
	grpcUp := flag.String("grpc-upstream", "", "host:port of a gRPC test service each HTTP request calls (instead of --upstream)")
	load := flag.String("load", "", "comma-separated URLs to request in turn from start to end (a load generator)")
	loadInterval := flag.Duration("load-interval", 100*time.Millisecond, "with --load: one request every this long")
	otlpAddr := flag.String("otlp", "", "OTLP/gRPC trace collector address (empty: none); the spans received are served on the control port at /spans")
	flag.Parse()
	if *failEvery < 0 || (*upstream != "" && *grpcUp != "") {
		log.Fatal("--fail-every must be >= 0; --upstream and --grpc-upstream exclude each other")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{name: *name, upstream: *upstream, client: &http.Client{Timeout: callTimeout}}
	handler := http.HandlerFunc(a.serve)
	if *grpcUp != "" {
		up, err := dialUpstream(*grpcUp)
		if err != nil {
			log.Fatal(err)
		}
		handler = func(w http.ResponseWriter, r *http.Request) { up.serve(*name, w, r) }
	}
	var spans http.Handler
	if *otlpAddr != "" {
		ln, err := net.Listen("tcp", *otlpAddr)
		if err != nil {
			log.Fatal(err)
		}
		col := otlptest.Serve(ln)
		defer col.Stop()
		spans = spansHandler(col)
	}
	var servers []*http.Server
	if *httpAddr != "" {
		servers = append(servers, &http.Server{Addr: *httpAddr, Handler: handler, ReadHeaderTimeout: 10 * time.Second})
	}
	if *control != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/call", a.call)
		mux.HandleFunc("/load/start", a.loadStart)
		mux.HandleFunc("/load/stop", a.loadStop)
		mux.HandleFunc("/load/counts", a.loadCounts)
		mux.HandleFunc("/tcp", a.tcp)
		mux.HandleFunc("/tls", a.tlsCall)
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
		if spans != nil {
			mux.Handle("/spans", spans)
		}
		servers = append(servers, &http.Server{Addr: *control, Handler: mux, ReadHeaderTimeout: 10 * time.Second})
	}
	errc := make(chan error, len(servers)+2)
	for _, s := range servers {
		go func() { errc <- s.ListenAndServe() }()
	}
	if *grpcAddr != "" {
		ln, err := net.Listen("tcp", *grpcAddr)
		if err != nil {
			log.Fatal(err)
		}
		defer serveGRPC(ln, *name, *failEvery, errc).Stop()
	}
	if *load != "" {
		urls, err := parseLoad(*load, *loadInterval)
		if err != nil {
			log.Fatal(err)
		}
		a.startupLoad(ctx, urls, *loadInterval)
	}
	if *tcpAddr != "" {
		ln, err := net.Listen("tcp", *tcpAddr)
		if err != nil {
			log.Fatal(err)
		}
		go a.echo(ln)
	}
	if *tlsAddr != "" {
		ln, err := net.Listen("tcp", *tlsAddr)
		if err != nil {
			log.Fatal(err)
		}
		if err := a.tlsEcho(ln); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("testapp %s: http %s, tcp %s, control %s, upstream %q", *name, *httpAddr, *tcpAddr, *control, *upstream)
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Fatal(err)
	}
	// As a Kubernetes application should: on SIGTERM, serve on while the
	// pod's removal from its Service reaches the clients (here, their
	// proxies through the destination service), then stop.
	log.Printf("testapp %s: terminating; serving on for %s", *name, *drain)
	select {
	case <-time.After(*drain):
	case err := <-errc:
		log.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
}

type app struct {
	name, upstream string
	client         *http.Client

	mu      sync.Mutex
	load    *loadRun
	startup *loadRun // the --load loop
}

// serve answers "<name> <marker>", or "<name> <marker> -> <upstream's
// answer>" with an upstream.
func (a *app) serve(w http.ResponseWriter, r *http.Request) {
	marker := r.Header.Get("X-Marker")
	if tp := r.Header.Values("traceparent"); len(tp) > 0 {
		w.Header()["X-Received-Traceparent"] = tp
	}
	if a.upstream == "" {
		fmt.Fprintf(w, "%s %s\n", a.name, marker)
		return
	}
	code, body, err := get(r.Context(), a.client, a.upstream+r.URL.RequestURI(), marker)
	if err != nil {
		http.Error(w, a.name+": upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "%s %s -> %s", a.name, marker, body)
}

func get(ctx context.Context, c *http.Client, u, marker string) (int, string, error) {
	code, body, _, err := getWith(ctx, c, u, marker, nil)
	return code, body, err
}

// getWith is get with extra request headers; it also returns the
// response's headers.
func getWith(ctx context.Context, c *http.Client, u, marker string, hdr http.Header) (int, string, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", nil, err
	}
	for k, vs := range hdr {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("X-Marker", marker)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), resp.Header, err
}

// echo answers each line of a TCP connection with "<name> <line>".
func (a *app) echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if _, err := fmt.Fprintf(c, "%s %s\n", a.name, sc.Text()); err != nil {
					return
				}
			}
		}()
	}
}

// Counts are the outcome of a series of calls.
type Counts struct {
	OK     int            `json:"ok"`
	Failed int            `json:"failed"`
	Codes  map[string]int `json:"codes"`
	Errors []string       `json:"errors,omitempty"`
	Last   string         `json:"last,omitempty"`
	// Headers are the response headers /call was asked to show, from the
	// last response that had them (joined by ", " when repeated).
	Headers map[string]string `json:"headers,omitempty"`
}

func (c *Counts) add(code int, body string, err error) {
	if c.Codes == nil {
		c.Codes = map[string]int{}
	}
	switch {
	case err != nil:
		c.Failed++
		c.Codes["error"]++
		if len(c.Errors) < keepErrors {
			c.Errors = append(c.Errors, err.Error())
		}
	case code != http.StatusOK:
		c.Failed++
		c.Codes[strconv.Itoa(code)]++
		if len(c.Errors) < keepErrors {
			c.Errors = append(c.Errors, fmt.Sprintf("%d: %s", code, strings.TrimSpace(body)))
		}
	default:
		c.OK++
		c.Codes["200"]++
	}
	c.Last = strings.TrimSpace(body)
}

type callArgs struct {
	url, marker string
	n           int
	interval    time.Duration
	header      http.Header // sent with every request
	show        []string    // response headers to report
}

// maxCallHeaders bounds the header and show parameters of /call.
const maxCallHeaders = 10

func parseCall(q url.Values) (callArgs, error) {
	a := callArgs{url: q.Get("url"), marker: q.Get("marker"), n: 1}
	if u, err := url.Parse(a.url); err != nil || (u.Scheme != "http") || u.Host == "" {
		return a, fmt.Errorf("url %q: want http://host[:port]/path", a.url)
	}
	if s := q.Get("n"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxCalls {
			return a, fmt.Errorf("n %q: want 1..%d", s, maxCalls)
		}
		a.n = n
	}
	if s := q.Get("interval"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > time.Minute {
			return a, fmt.Errorf("interval %q: want a duration up to 1m", s)
		}
		a.interval = d
	}
	if hs := q["header"]; len(hs) > 0 {
		if len(hs) > maxCallHeaders {
			return a, fmt.Errorf("header: at most %d", maxCallHeaders)
		}
		a.header = http.Header{}
		for _, h := range hs {
			name, value, ok := strings.Cut(h, ":")
			value = strings.TrimSpace(value)
			if !ok || !validHeaderName(name) || strings.ContainsAny(value, "\r\n\x00") {
				return a, fmt.Errorf("header %q: want Name: Value on one line", h)
			}
			a.header.Add(name, value)
		}
	}
	if ss := q["show"]; len(ss) > 0 {
		if len(ss) > maxCallHeaders {
			return a, fmt.Errorf("show: at most %d", maxCallHeaders)
		}
		for _, name := range ss {
			if !validHeaderName(name) {
				return a, fmt.Errorf("show %q: not a header name", name)
			}
		}
		a.show = ss
	}
	return a, nil
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

func (a *app) call(w http.ResponseWriter, r *http.Request) {
	args, err := parseCall(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var c Counts
	for i := 0; i < args.n && r.Context().Err() == nil; i++ {
		if i > 0 && args.interval > 0 {
			time.Sleep(args.interval)
		}
		code, body, hdr, err := getWith(r.Context(), a.client, args.url, args.marker, args.header)
		c.add(code, body, err)
		for _, name := range args.show {
			if vs := hdr.Values(name); len(vs) > 0 {
				if c.Headers == nil {
					c.Headers = map[string]string{}
				}
				c.Headers[name] = strings.Join(vs, ", ")
			}
		}
	}
	writeJSON(w, c)
}

type loadRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	counts Counts
}

func (a *app) loadStart(w http.ResponseWriter, r *http.Request) {
	args, err := parseCall(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.load != nil {
		http.Error(w, "a load is running; stop it first", http.StatusConflict)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxLoad)
	run := &loadRun{cancel: cancel, done: make(chan struct{})}
	a.load = run
	go func() {
		defer close(run.done)
		for ctx.Err() == nil {
			code, body, err := get(ctx, a.client, args.url, args.marker)
			if ctx.Err() != nil {
				return // the stop, not the callee, ended this call
			}
			a.mu.Lock()
			run.counts.add(code, body, err)
			a.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(args.interval):
			}
		}
	}()
	io.WriteString(w, "started\n")
}

func (a *app) loadStop(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	run := a.load
	a.load = nil
	a.mu.Unlock()
	if run == nil {
		http.Error(w, "no load is running", http.StatusConflict)
		return
	}
	run.cancel()
	<-run.done
	writeJSON(w, run.counts)
}

// TCPResult is the outcome of /tcp.
type TCPResult struct {
	Reply string `json:"reply,omitempty"`
	Error string `json:"error,omitempty"`
}

func (a *app) tcp(w http.ResponseWriter, r *http.Request) {
	addr, payload := r.URL.Query().Get("addr"), r.URL.Query().Get("payload")
	if _, _, err := net.SplitHostPort(addr); err != nil || strings.ContainsAny(payload, "\r\n") {
		http.Error(w, "want addr=host:port and a one-line payload", http.StatusBadRequest)
		return
	}
	var res TCPResult
	reply, err := exchange(r.Context(), addr, payload)
	if err != nil {
		res.Error = err.Error()
	} else {
		res.Reply = reply
	}
	writeJSON(w, res)
}

func exchange(ctx context.Context, addr, payload string) (string, error) {
	var d net.Dialer
	return lineExchange(ctx, payload, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) })
}

// lineExchange dials, sends payload as one line and returns the line
// answered, all within callTimeout.
func lineExchange(ctx context.Context, payload string, dial func(context.Context) (net.Conn, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	if _, err := fmt.Fprintf(c, "%s\n", payload); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return "", errors.New("connection closed without a reply")
		}
		return "", err
	}
	return strings.TrimSpace(line), nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
