// Command embed-discovery embeds Weft's discovery in a program of its own:
// it fills an index with Kubernetes objects (built in code, or read from
// manifest files), serves the Destination API on loopback, follows a
// service with the proxy-side client, and calls a real gRPC backend
// through the gRPC resolver. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/discovery/resolver"
	"github.com/weftmesh/weft/mesh/discovery/static"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed-discovery:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("embed-discovery", flag.ContinueOnError)
	manifests := fs.String("manifests", "", "serve the objects in this manifest file or directory instead of the built-in demo")
	authority := fs.String("authority", "greeter.demo.svc.cluster.local:80", "authority to resolve (with --manifests)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	// 1. The index: the translation core and fan-out, fed with objects.
	idx, err := discovery.NewIndex()
	if err != nil {
		return err
	}
	defer idx.Close()

	// 2. The Destination server, on a gRPC server this program owns.
	gs := grpc.NewServer()
	srv, err := discovery.NewServer(idx)
	if err != nil {
		return err
	}
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	fmt.Fprintf(out, "destination server on %s\n", lis.Addr())

	// 3. The proxy-side client.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c, err := client.New(ctx, conn)
	if err != nil {
		return err
	}
	defer c.Close()

	if *manifests != "" {
		src, err := static.New(ctx, idx, []string{*manifests})
		if err != nil {
			return err
		}
		defer src.Close()
		return show(ctx, c, *authority, out)
	}
	return demo(ctx, idx, c, out)
}

// demo serves a service "greeter" whose endpoint is a real gRPC server on
// loopback, calls it through the resolver, then adds a second endpoint.
func demo(ctx context.Context, idx *discovery.Index, c *client.Client, out io.Writer) error {
	backend, stopBackend, err := startBackend()
	if err != nil {
		return err
	}
	defer stopBackend()
	if err := idx.Replace(greeter(backend, "127.0.0.1")); err != nil {
		return err
	}

	const authority = "greeter.demo.svc.cluster.local:80"
	w, err := c.Watch(ctx, authority)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Wait(ctx); err != nil {
		return err
	}
	set, _ := w.Endpoints()
	printSet(out, authority, set)

	// Any gRPC client can use discovery through the resolver.
	gc, err := grpc.NewClient("weft:///"+authority,
		grpc.WithResolvers(resolver.NewBuilder(c)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer gc.Close()
	var p peer.Peer
	resp, err := healthpb.NewHealthClient(gc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true), grpc.Peer(&p))
	if err != nil {
		return fmt.Errorf("call through the resolver: %w", err)
	}
	fmt.Fprintf(out, "called %s through the resolver: %s via %s\n", authority, resp.GetStatus(), p.Addr)

	// Scale up: a second endpoint appears and the watch sees it.
	if err := idx.Replace(greeter(backend, "127.0.0.1", "127.0.0.2")); err != nil {
		return err
	}
	for len(set.Endpoints) < 2 {
		select {
		case <-w.Updated():
			set, _ = w.Endpoints()
		case <-ctx.Done():
			return errors.New("the update did not arrive")
		}
	}
	printSet(out, authority, set)
	return nil
}

// show prints an authority's endpoints from manifests.
func show(ctx context.Context, c *client.Client, authority string, out io.Writer) error {
	w, err := c.Watch(ctx, authority)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Wait(ctx); err != nil {
		return err
	}
	set, _ := w.Endpoints()
	printSet(out, authority, set)
	return nil
}

func printSet(out io.Writer, authority string, set discovery.EndpointSet) {
	switch {
	case !set.Exists:
		fmt.Fprintf(out, "%s does not exist\n", authority)
	case len(set.Endpoints) == 0:
		fmt.Fprintf(out, "%s has no endpoints\n", authority)
	default:
		fmt.Fprintf(out, "%s has %d endpoint(s):\n", authority, len(set.Endpoints))
		for _, e := range set.Endpoints {
			id := e.Identity
			if id == "" {
				id = "(no identity: plaintext)"
			}
			fmt.Fprintf(out, "  %s weight=%d hint=%s identity=%s\n", e.Addr, e.Weight, e.Hint, id)
		}
	}
}

func startBackend() (int32, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	return int32(lis.Addr().(*net.TCPAddr).Port), gs.Stop, nil
}

// greeter describes Service demo/greeter, port 80, with one endpoint per
// IP on the backend's port, as a cluster's EndpointSlice controller
// would. The first pod is meshed.
func greeter(port int32, ips ...string) []runtime.Object {
	name, proto := "grpc", corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "greeter-a", Labels: map[string]string{discoveryv1.LabelServiceName: "greeter"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "greeter"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.50", Ports: []corev1.ServicePort{
				{Name: "grpc", Port: 80, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP},
			}},
		},
	}
	for i, ip := range ips {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: fmt.Sprintf("greeter-%d", i)},
			Spec:       corev1.PodSpec{ServiceAccountName: "greeter"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
		}
		if i == 0 {
			pod.Labels = map[string]string{"linkerd.io/control-plane-ns": "weft"}
		}
		ready := true
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod.Name},
		})
		objs = append(objs, pod)
	}
	return append(objs, slice)
}
