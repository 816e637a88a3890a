package discovery

// The fan-out benchmark of issue 4: one service with 5,000 endpoints and
// 1,000 subscribers, each on its own gRPC connection as proxies would be.
// It measures the time from one endpoint change to every subscriber
// holding it (p50/p99 over the changes), CPU per change, heap per
// subscriber and the subscription setup rate, for the shared fan-out and,
// in the same run, for a naive design in which every subscriber has its
// own watch and gets its own full copy of the snapshot on every change.
//
//	go test -run '^$' -bench 'Fanout' -benchtime 30x -timeout 20m ./mesh/discovery/

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	benchEndpoints   = 5000
	benchSubscribers = 1000
	benchSliceSize   = 100
	benchPath        = "web.shop.svc.cluster.local:80"
)

func benchIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", 2+i/65000, (i/250)%260, i%250+1) }

func benchPod(i int) *corev1.Pod {
	t := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i),
			Labels:          map[string]string{labelControlPlaneNS: "weft", labelPodTemplateHash: "5d8f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "u", Controller: &t}}},
		Spec:   corev1.PodSpec{ServiceAccountName: "web"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: benchIP(i)},
	}
}

func benchSlice(name string, from, to int) *discoveryv1.EndpointSlice {
	pn, port, proto, ready, zone := "http", int32(8080), corev1.ProtocolTCP, true, "zone-a"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Port: &port, Protocol: &proto}},
	}
	for i := from; i < to; i++ {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{benchIP(i)}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, Zone: &zone,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("web-%d", i)},
		})
	}
	return s
}

func benchObjects() []runtime.Object {
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
	}
	for i := range benchEndpoints {
		objs = append(objs, benchPod(i))
	}
	for from := 0; from < benchEndpoints; from += benchSliceSize {
		objs = append(objs, benchSlice(fmt.Sprintf("web-%03d", from/benchSliceSize), from, from+benchSliceSize))
	}
	return objs
}

// benchSource is a design under test: a Source and a way to apply
// object changes to it.
type benchSource interface {
	Source
	Upsert(objs ...runtime.Object) error
}

// naiveSource is the baseline: every subscriber has its own watch. On
// every change each subscriber's view is translated again from the
// objects and handed over as a full, deep copy of the snapshot, so deltas
// and messages are computed per subscriber.
type naiveSource struct {
	cfg  config
	mu   sync.Mutex
	c    *cluster
	subs map[*naiveSub]struct{}
}

type naiveSub struct {
	target Target
	topic  *Topic[*EndpointSnapshot]
}

func newNaiveSource() *naiveSource {
	cfg, _ := newConfig(nil)
	return &naiveSource{cfg: cfg, c: newCluster(), subs: map[*naiveSub]struct{}{}}
}

func deepCopySet(s EndpointSet) EndpointSet {
	out := EndpointSet{Exists: s.Exists, MetricLabels: maps.Clone(s.MetricLabels), Endpoints: slices.Clone(s.Endpoints)}
	for i := range out.Endpoints {
		out.Endpoints[i].MetricLabels = maps.Clone(out.Endpoints[i].MetricLabels)
	}
	return out
}

func (n *naiveSource) SubscribeEndpoints(path string) (*Subscription[*EndpointSnapshot], error) {
	t, err := ParseTarget(path, n.cfg.clusterDomain)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	set, _ := n.c.endpoints(t, &n.cfg)
	snap, _ := NextEndpointSnapshot(nil, deepCopySet(set))
	s := &naiveSub{target: t}
	s.topic = NewTopic(snap, func() { n.mu.Lock(); delete(n.subs, s); n.mu.Unlock() })
	n.subs[s] = struct{}{}
	return s.topic.Subscribe(), nil
}

func (n *naiveSource) SubscribeProfile(string, ContextToken) (*Subscription[*ProfileSnapshot], error) {
	return nil, fmt.Errorf("not benchmarked")
}

func (n *naiveSource) Upsert(objs ...runtime.Object) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, o := range objs {
		n.c.apply(o, false, newTouched())
	}
	for s := range n.subs {
		set, _ := n.c.endpoints(s.target, &n.cfg)
		if next, changed := NextEndpointSnapshot(s.topic.Latest(), deepCopySet(set)); changed {
			s.topic.Publish(next)
		}
	}
	return nil
}

// rawCodec hands the client the message bytes undecoded, so that client
// work does not dominate what is measured; small messages (the deltas)
// are decoded by the subscriber.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (rawCodec) Unmarshal(data []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

type receipt struct {
	addr string
	at   time.Time
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAndStacks() uint64 {
	h, st := heapStacks()
	return h + st
}

func heapStacks() (uint64, uint64) {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkFanout runs the shared design with 1,000 subscribers, and
// both designs with 250: the naive design keeps a full copy of the
// snapshot and its encoded messages per subscriber (about 5 MiB each
// here), more than this shared machine should hold for 1,000.
func BenchmarkFanout(b *testing.B) {
	shared := func(n, conns int) func(b *testing.B) {
		return func(b *testing.B) {
			idx, err := NewIndex()
			if err != nil {
				b.Fatal(err)
			}
			defer idx.Close()
			runFanout(b, idx, n, conns)
		}
	}
	b.Run("shared-1000subs", shared(benchSubscribers, benchSubscribers))
	b.Run("shared-1000subs-10conns", shared(benchSubscribers, 10))
	b.Run("shared-250subs", shared(250, 250))
	b.Run("naive-250subs", func(b *testing.B) { runFanout(b, newNaiveSource(), 250, 250) })
}

// runFanout serves src and subscribes over conns client connections (one
// per subscriber when conns == subscribers, as with one proxy each). The
// subscribers run in a child process (this test binary, running
// TestHelperFanoutClients), so the heap and CPU figures are the server's
// alone; the child reports when each subscriber received each new
// endpoint.
func runFanout(b *testing.B, src benchSource, subscribers, conns int) {
	if err := src.Upsert(benchObjects()...); err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(src)
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	// A first subscriber, in this process, makes the shared snapshot and
	// its encoded messages, so the per-subscriber figures below leave them
	// out.
	warm, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer warm.Close()
	warmCtx, warmCancel := context.WithCancel(context.Background())
	defer warmCancel()
	ws, err := pb.NewDestinationClient(warm).Get(warmCtx, &pb.GetDestination{Path: benchPath})
	if err != nil {
		b.Fatal(err)
	}
	for range (benchEndpoints + maxAddrsPerUpdate - 1) / maxAddrsPerUpdate {
		if _, err := ws.Recv(); err != nil {
			b.Fatal(err)
		}
	}

	heap0, stack0 := heapStacks()
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFanoutClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", fanoutClientEnv, lis.Addr(), subscribers, conns))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close() // the child exits when its stdin closes
		_ = cmd.Wait()
	}()
	receipts := make(chan receipt, subscribers*4)
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if line == "READY" {
				close(readyc)
				continue
			}
			var addr string
			var nanos int64
			if _, err := fmt.Sscanf(line, "%s %d", &addr, &nanos); err == nil {
				receipts <- receipt{addr: addr, at: time.Unix(0, nanos)}
			}
		}
	}()
	select {
	case <-readyc:
	case <-time.After(5 * time.Minute):
		b.Fatal("the subscribers did not get their snapshots")
	}
	setup := time.Since(start)
	heap1, stack1 := heapStacks()
	if path := os.Getenv("WEFT_FANOUT_HEAP_PROFILE"); path != "" {
		// The live heap with every subscription open, for finding what a
		// subscription costs.
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			_ = f.Close()
		}
	}
	heapPer := (float64(heap1) - float64(heap0)) / float64(subscribers)
	stackPer := (float64(stack1) - float64(stack0)) / float64(subscribers)

	var all, each []time.Duration
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		n := benchEndpoints + i
		t0 := time.Now()
		if err := src.Upsert(benchPod(n), benchSlice("web-churn", benchEndpoints, n+1)); err != nil {
			b.Fatal(err)
		}
		want := benchIP(n)
		var last time.Time
		for got := 0; got < subscribers; {
			select {
			case r := <-receipts:
				if r.addr != want {
					continue
				}
				got++
				each = append(each, r.at.Sub(t0))
				if r.at.After(last) {
					last = r.at
				}
			case <-time.After(60 * time.Second):
				b.Fatalf("change %d reached %d of %d subscribers", i, got, subscribers)
			}
		}
		all = append(all, last.Sub(t0))
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(percentile(all, 0.5).Microseconds())/1000, "all-p50-ms")
	b.ReportMetric(float64(percentile(all, 0.99).Microseconds())/1000, "all-p99-ms")
	b.ReportMetric(float64(percentile(each, 0.5).Microseconds())/1000, "sub-p50-ms")
	b.ReportMetric(float64(percentile(each, 0.99).Microseconds())/1000, "sub-p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "server-cpu-ms/change")
	b.ReportMetric(heapPer/1024, "server-heap-KiB/sub")
	b.ReportMetric(stackPer/1024, "server-stack-KiB/sub")
	b.ReportMetric(float64(subscribers)/setup.Seconds(), "setup-subs/s")
}

const fanoutClientEnv = "WEFT_FANOUT_CLIENTS"

// TestHelperFanoutClients is not a test: it is the subscriber process of
// BenchmarkFanout, and does nothing unless that benchmark starts it with
// WEFT_FANOUT_CLIENTS="ADDR SUBSCRIBERS CONNS". It opens the streams,
// prints READY once every subscriber has its initial snapshot, then a line
// "IP UNIXNANO" each time a subscriber receives an added endpoint, until
// its stdin closes.
func TestHelperFanoutClients(t *testing.T) {
	spec := os.Getenv(fanoutClientEnv)
	if spec == "" {
		return
	}
	var addr string
	var subscribers, conns int
	if _, err := fmt.Sscanf(spec, "%s %d %d", &addr, &subscribers, &conns); err != nil {
		t.Fatalf("bad %s %q: %v", fanoutClientEnv, spec, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One writer goroutine, flushing when it has nothing else to write, so
	// reporting never holds up the subscribers (timestamps are taken on
	// receipt, before reporting).
	lines := make(chan string, subscribers*4)
	written := make(chan struct{})
	go func() {
		defer close(written)
		out := bufio.NewWriterSize(os.Stdout, 1<<16)
		for l := range lines {
			_, _ = out.WriteString(l + "\n")
			if len(lines) == 0 {
				_ = out.Flush()
			}
		}
		_ = out.Flush()
	}()
	emit := func(line string) { lines <- line }
	initialMsgs := (benchEndpoints + maxAddrsPerUpdate - 1) / maxAddrsPerUpdate
	var ready, done sync.WaitGroup
	var clients []*grpc.ClientConn
	for i := range subscribers {
		if i < conns {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, conn)
		}
		st, err := clients[i%conns].NewStream(ctx, &pb.Destination_ServiceDesc.Streams[0], pb.Destination_Get_FullMethodName, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&pb.GetDestination{Path: benchPath}); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var buf []byte
			var u pb.Update
			for n := 0; ; n++ {
				if err := st.RecvMsg(&buf); err != nil {
					if n < initialMsgs {
						ready.Done()
					}
					return
				}
				if n+1 == initialMsgs {
					ready.Done()
				}
				if n < initialMsgs || len(buf) > 64<<10 {
					buf = nil
					continue
				}
				if err := proto.Unmarshal(buf, &u); err != nil {
					continue
				}
				now := time.Now().UnixNano()
				for _, wa := range u.GetAdd().GetAddrs() {
					if ep, err := EndpointFromProto(wa); err == nil {
						emit(fmt.Sprintf("%s %d", ep.Addr.Addr(), now))
					}
				}
			}
		}()
	}
	ready.Wait()
	emit("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	for _, c := range clients {
		_ = c.Close()
	}
	done.Wait()
	close(lines)
	<-written
}

// BenchmarkSubscriptionMemory measures what the server keeps per
// subscriber beyond the shared snapshot, without gRPC: the subscription
// and a goroutine parked where the Get handler waits. For the naive
// design that includes the subscriber's own copy of the snapshot, so it
// is measured over fewer subscribers (the figure is per subscriber).
func BenchmarkSubscriptionMemory(b *testing.B) {
	for _, design := range []string{"shared", "naive"} {
		b.Run(design, func(b *testing.B) {
			for range b.N {
				var src benchSource
				n := benchSubscribers
				if design == "shared" {
					idx, _ := NewIndex()
					defer idx.Close()
					src = idx
				} else {
					src = newNaiveSource()
					n = 100
				}
				if err := src.Upsert(benchObjects()...); err != nil {
					b.Fatal(err)
				}
				// One subscriber first, with the snapshot's messages built,
				// so shared state is counted once, outside the figure.
				first, _ := src.SubscribeEndpoints(benchPath)
				_ = first.Latest().updatesSince(nil)
				before := heapAndStacks()
				subs := make([]*Subscription[*EndpointSnapshot], n)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				for i := range subs {
					s, err := src.SubscribeEndpoints(benchPath)
					if err != nil {
						b.Fatal(err)
					}
					subs[i] = s
					wg.Add(1)
					go func() {
						defer wg.Done()
						_ = s.Latest()
						select {
						case <-s.Updated():
						case <-stop:
						}
					}()
				}
				per := (float64(heapAndStacks()) - float64(before)) / float64(n)
				close(stop)
				wg.Wait()
				for _, s := range subs {
					s.Close()
				}
				first.Close()
				b.ReportMetric(per, "B/sub")
			}
		})
	}
}

// BenchmarkFanoutCore is the fan-out without gRPC: 1,000 goroutines
// parked where the Get handler waits, each taking the messages for the
// change and encoding them (once per batch for the shared design, since
// the server sends encoded messages to every stream; once per subscriber
// for the naive one). It isolates the design from the transport.
func BenchmarkFanoutCore(b *testing.B) {
	b.Run("shared", func(b *testing.B) {
		idx, err := NewIndex()
		if err != nil {
			b.Fatal(err)
		}
		defer idx.Close()
		runFanoutCore(b, idx, true)
	})
	b.Run("naive", func(b *testing.B) { runFanoutCore(b, newNaiveSource(), false) })
}

func runFanoutCore(b *testing.B, src benchSource, shared bool) {
	if err := src.Upsert(benchObjects()...); err != nil {
		b.Fatal(err)
	}
	var encoded sync.Map // *batch -> struct{}: batches already encoded
	encode := func(bt *batch) {
		if shared {
			if _, done := encoded.LoadOrStore(bt, struct{}{}); done {
				return
			}
		}
		for _, m := range bt.msgs {
			if _, err := proto.Marshal(m); err != nil {
				b.Error(err)
			}
		}
	}
	type tick struct {
		size int
		at   time.Time
	}
	ticks := make(chan tick, benchSubscribers*4)
	stop := make(chan struct{})
	var ready, wg sync.WaitGroup
	for range benchSubscribers {
		s, err := src.SubscribeEndpoints(benchPath)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			var last *EndpointSnapshot
			for {
				cur := s.Latest()
				if bt := cur.updatesSince(last); bt != nil {
					encode(bt)
					if last == nil {
						ready.Done()
					} else {
						select {
						case ticks <- tick{len(cur.Set.Endpoints), time.Now()}:
						case <-stop:
							return
						}
					}
				}
				last = cur
				select {
				case <-s.Updated():
				case <-stop:
					return
				}
			}
		}()
	}
	ready.Wait()
	var all []time.Duration
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		n := benchEndpoints + i
		t0 := time.Now()
		if err := src.Upsert(benchPod(n), benchSlice("web-churn", benchEndpoints, n+1)); err != nil {
			b.Fatal(err)
		}
		var last time.Time
		for got := 0; got < benchSubscribers; {
			select {
			case tk := <-ticks:
				if tk.size < n+1 {
					continue
				}
				got++
				if tk.at.After(last) {
					last = tk.at
				}
			case <-time.After(120 * time.Second):
				b.Fatalf("change %d reached %d of %d subscribers", i, got, benchSubscribers)
			}
		}
		all = append(all, last.Sub(t0))
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(percentile(all, 0.5).Microseconds())/1000, "all-p50-ms")
	b.ReportMetric(float64(percentile(all, 0.99).Microseconds())/1000, "all-p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/change")
}
