package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/install"
)

// DiagnosticsPolicyCommand is `weft diagnostics policy RESOURCE PORT`:
// it asks the running policy controller what it serves a proxy for a
// pod's port (inbound, as InboundServerPolicies.GetPort) or a Service's
// port (outbound, as OutboundPolicies.Get) and prints the answer, as
// `linkerd diagnostics policy` does.
func DiagnosticsPolicyCommand() Command {
	return Command{
		Name:    "policy",
		Summary: "show the policy the policy controller serves for a pod port or a Service port",
		Args:    "RESOURCE PORT [flags]",
		Long:    diagnosticsPolicyUsage,
		Setup:   setupDiagnosticsPolicy,
	}
}

const diagnosticsPolicyUsage = `RESOURCE is po/NAME (pod/NAME) for the inbound policy of that pod's PORT,
as its proxy receives it, or svc/NAME (service/NAME) for the outbound
policy of that Service's PORT, as a client's proxy receives it; both in
--namespace.

The policy controller is reached through the Kubernetes API server (a port
forward to one of its pods in --control-plane-namespace, or to --policy-pod),
or directly at --policy HOST:PORT (plaintext gRPC, as on a development
machine or from inside the cluster).

Examples:
  weft diagnostics policy -n emojivoto po/web-6d66d87995-bvrnn 8080
  weft diagnostics policy -n emojivoto svc/web-svc 80 -o json

Exit status: 0 with the policy printed, 1 when the controller cannot be
reached or does not know the pod or Service, 2 for bad arguments or flags.
`

func setupDiagnosticsPolicy(fs *FlagSet) Action {
	namespace := fs.StringP("namespace", "n", "default", "namespace of RESOURCE")
	output := fs.StringP("output", "o", "yaml", "output format: yaml or json")
	addr := fs.String("policy", "", "HOST:PORT of a policy controller to ask directly (plaintext gRPC) instead of one in the cluster")
	pod := fs.String("policy-pod", "", "the policy controller pod to ask, when several run (default: the first ready one)")
	cpNamespace := fs.String("control-plane-namespace", vocab.DefaultControlPlaneNamespace, "namespace of the policy controller")
	token := fs.String("token", "", `outbound: the client workload to ask as, <namespace>:<pod> or {"ns":"...","pod":"..."} (default: a pod named diagnostics in --namespace)`)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	return func(ctx context.Context, args []string, stdio IO) int {
		usage := func(format string, a ...any) int {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics policy: "+format+"\n", a...)
			return ExitUsage
		}
		fail := func(format string, a ...any) int {
			fmt.Fprintf(stdio.Stderr, "weft diagnostics policy: "+format+"\n", a...)
			return ExitFailure
		}
		if len(args) != 2 {
			return usage("want RESOURCE and PORT, such as po/web-0 8080 or svc/web 80 (see 'weft diagnostics policy --help')")
		}
		req, err := parsePolicyQuery(args[0], args[1], *namespace, *token)
		if err != nil {
			return usage("%v", err)
		}
		if err := checkOutput(*output, "yaml", "json"); err != nil {
			return usage("%v", err)
		}
		if *timeout <= 0 {
			return usage("--timeout %s: want a positive duration", *timeout)
		}
		if *addr != "" && *pod != "" {
			return usage("--policy and --policy-pod do not go together")
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()

		target := *addr
		if target == "" {
			cfg, err := kubeRESTConfig(*kubeconfig, *kubeContext, *timeout)
			if err != nil {
				return usage("kubeconfig: %v", err)
			}
			local, stop, err := forwardToPolicy(ctx, cfg, *cpNamespace, *pod)
			if err != nil {
				return fail("%v", err)
			}
			defer stop()
			target = local
		}
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return usage("--policy %s: %v", target, err)
		}
		defer conn.Close()
		answer, err := req.ask(ctx, conn)
		if err != nil {
			return fail("%s: %s", req.what, status.Convert(err).Message())
		}
		out, err := renderPolicy(answer, *output)
		if err != nil {
			return fail("%v", err)
		}
		_, _ = stdio.Stdout.Write(out)
		return ExitOK
	}
}

// policyQuery is one question for the policy controller.
type policyQuery struct {
	what string // "pod web-0 in shop, port 8080", for errors
	in   *inbound.PortSpec
	out  *outbound.TrafficSpec
}

// parsePolicyQuery reads RESOURCE and PORT as `linkerd diagnostics
// policy` takes them. It trusts nothing: names must be DNS labels or
// subdomains (what Kubernetes allows), the port a number in 1-65535.
func parsePolicyQuery(resource, portArg, namespace, token string) (policyQuery, error) {
	kind, name, ok := strings.Cut(resource, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return policyQuery{}, fmt.Errorf("RESOURCE %q: want po/NAME or svc/NAME", resource)
	}
	if !validName(name) {
		return policyQuery{}, fmt.Errorf("RESOURCE %q: %q is not a valid object name", resource, name)
	}
	if !validName(namespace) || strings.Contains(namespace, ".") {
		return policyQuery{}, fmt.Errorf("--namespace %q is not a valid namespace name", namespace)
	}
	port, err := strconv.ParseUint(portArg, 10, 16)
	if err != nil || port == 0 {
		return policyQuery{}, fmt.Errorf("PORT %q: want a number from 1 to 65535", portArg)
	}
	switch strings.ToLower(kind) {
	case "po", "pod", "pods":
		// The workload as an injected proxy names itself.
		w, _ := json.Marshal(map[string]string{"ns": namespace, "pod": name})
		return policyQuery{
			what: fmt.Sprintf("pod %s in %s, port %d", name, namespace, port),
			in:   &inbound.PortSpec{Workload: string(w), Port: uint32(port)},
		}, nil
	case "svc", "service", "services":
		if token == "" {
			token = namespace + ":diagnostics"
		}
		return policyQuery{
			what: fmt.Sprintf("Service %s in %s, port %d", name, namespace, port),
			out: &outbound.TrafficSpec{
				SourceWorkload: token,
				Target:         &outbound.TrafficSpec_Authority{Authority: fmt.Sprintf("%s.%s.svc:%d", name, namespace, port)},
			},
		}, nil
	}
	return policyQuery{}, fmt.Errorf("RESOURCE %q: kind %q is neither a pod (po) nor a Service (svc)", resource, kind)
}

// validName accepts a DNS subdomain (RFC 1123), the form of pod and
// Service names.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

func (q policyQuery) ask(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
	if q.in != nil {
		return inbound.NewInboundServerPoliciesClient(conn).GetPort(ctx, q.in)
	}
	return outbound.NewOutboundPoliciesClient(conn).Get(ctx, q.out)
}

// renderPolicy prints the answer with the proto's field names, as JSON or
// as YAML made from that JSON.
func renderPolicy(m proto.Message, format string) ([]byte, error) {
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	if format == "yaml" {
		return yaml.JSONToYAML(js)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// forwardToPolicy forwards a loopback port, through the API server, to the
// policy port of a policy controller pod (pod, or the first ready one in
// namespace) and returns its address and the function that ends it.
func forwardToPolicy(ctx context.Context, cfg *rest.Config, namespace, pod string) (string, func(), error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, err
	}
	if pod == "" {
		if pod, err = readyPolicyPod(ctx, kube, namespace); err != nil {
			return "", nil, err
		}
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", nil, err
	}
	url := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, url)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", vocab.PolicyPort)}, stopCh, readyCh, io.Discard, &errOut)
	if err != nil {
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	stop := func() {
		close(stopCh)
		<-done
	}
	select {
	case <-readyCh:
	case err := <-done:
		return "", nil, fmt.Errorf("port forward to pod %s/%s: %v %s", namespace, pod, err, strings.TrimSpace(errOut.String()))
	case <-ctx.Done():
		stop()
		return "", nil, fmt.Errorf("port forward to pod %s/%s: %w", namespace, pod, ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		stop()
		return "", nil, fmt.Errorf("port forward to pod %s/%s: no local port (%v)", namespace, pod, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), stop, nil
}

// readyPolicyPod names the first (by name) running and ready policy
// controller pod in namespace.
func readyPolicyPod(ctx context.Context, kube kubernetes.Interface, namespace string) (string, error) {
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: install.LabelComponent + "=policy"})
	if err != nil {
		return "", fmt.Errorf("finding the policy controller in %s: %w", namespace, err)
	}
	var ready []string
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, p.Name)
			}
		}
	}
	if len(ready) == 0 {
		return "", errors.New("no ready policy controller pod in " + namespace + " (is Weft installed there? see --control-plane-namespace)")
	}
	sort.Strings(ready)
	return ready[0], nil
}
