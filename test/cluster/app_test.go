//go:build clusterintegration

package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/vocab"
)

// The application: client -> frontend -> backend by Service names, and an
// intruder that calls backend directly.
const (
	httpPort    = 8080
	tcpPort     = 9090
	tlsPort     = 9443
	controlPort = 8081
)

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// appNamespace creates a namespace (annotated for injection when inject)
// and returns its name. cleanup registers its deletion: the Cleanup of the
// test that outlives every step using the namespace (a step's own t would
// delete it as soon as that step ends).
func (e *env) appNamespace(t *testing.T, cleanup func(func()), prefix string, inject bool) string {
	t.Helper()
	var annotations map[string]string
	if inject {
		annotations = map[string]string{vocab.AnnotationInject: vocab.InjectEnabled}
	}
	return e.namespaceWith(t, cleanup, prefix, annotations)
}

// namespaceWith is appNamespace with the namespace's annotations given.
func (e *env) namespaceWith(t *testing.T, cleanup func(func()), prefix string, annotations map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + randomSuffix(), Annotations: annotations}}
	_, err := e.kube.CoreV1().Namespaces().Create(timeout(t, time.Minute), ns, metav1.CreateOptions{})
	require.NoError(t, err)
	cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// deployApp creates the ServiceAccount, Deployment and Service of one
// testapp workload.
func (e *env) deployApp(t *testing.T, ns, name string, args ...string) {
	t.Helper()
	e.deployAppPorts(t, ns, name, nil, args...)
}

// deployAppPorts is deployApp with more ports on the Service than the HTTP
// and echo ports.
func (e *env) deployAppPorts(t *testing.T, ns, name string, more []corev1.ServicePort, args ...string) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	labels := map[string]string{"app": name}
	_, err := e.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	one := int32(1)
	_, err = e.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					// The test drives the app on its control port from the
					// node: that traffic stays out of the mesh.
					vocab.AnnotationSkipInboundPorts: fmt.Sprint(controlPort),
				}},
				Spec: e.appPodSpec(name, args),
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: append([]corev1.ServicePort{
			{Name: "http", Port: httpPort, TargetPort: intstr.FromInt32(httpPort)},
			{Name: "echo", Port: tcpPort, TargetPort: intstr.FromInt32(tcpPort)},
			{Name: "tls-echo", Port: tlsPort, TargetPort: intstr.FromInt32(tlsPort)},
		}, more...)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (e *env) appPodSpec(name string, args []string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:            name,
		TerminationGracePeriodSeconds: ptr(int64(20)),
		Containers: []corev1.Container{{
			Name:            "app",
			Image:           e.images["testapp"].Ref,
			ImagePullPolicy: corev1.PullNever,
			Args:            append([]string{"--name", name}, args...),
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: httpPort}, {Name: "echo", ContainerPort: tcpPort}, {Name: "tls-echo", ContainerPort: tlsPort}, {Name: "control", ContainerPort: controlPort},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(controlPort)}}, PeriodSeconds: 1},
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr(true),
				AllowPrivilegeEscalation: ptr(false),
				ReadOnlyRootFilesystem:   ptr(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
	}
}

// podsOf lists the running, not terminating pods of app in ns.
func (e *env) podsOf(ctx context.Context, ns, app string) ([]corev1.Pod, error) {
	list, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// onePod returns the single running pod of app.
func (e *env) onePod(t *testing.T, ns, app string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	eventually(t, 2*time.Minute, "one running pod of "+ns+"/"+app, func(ctx context.Context) error {
		pods, err := e.podsOf(ctx, ns, app)
		if err != nil {
			return err
		}
		if len(pods) != 1 {
			return fmt.Errorf("%d running pods", len(pods))
		}
		pod = pods[0]
		return nil
	})
	return pod
}

// nodeHTTP is an HTTP client whose connections start inside the node's
// network namespace, where pod addresses are reachable.
func (e *env) nodeHTTP() *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return e.state.DialInNode(ctx, addr) },
		// One connection per call: the pods under test come and go.
		DisableKeepAlives: true,
	}}
}

// control calls the testapp control endpoint path on pod and decodes its
// JSON answer into out (nil: ignore the body).
func (e *env) control(ctx context.Context, pod corev1.Pod, path string, q url.Values, out any) error {
	u := fmt.Sprintf("http://%s/%s?%s", net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(controlPort)), strings.TrimPrefix(path, "/"), q.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := e.nodeHTTP().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", pod.Name, path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// counts is testapp's answer to /call and /load/stop.
type counts struct {
	OK     int            `json:"ok"`
	Failed int            `json:"failed"`
	Codes  map[string]int `json:"codes"`
	Errors []string       `json:"errors"`
	Last   string         `json:"last"`
	// Headers are the response headers asked for with show (callWith).
	Headers map[string]string `json:"headers"`
}

// call makes n calls from pod to target and returns the counts.
func (e *env) call(t *testing.T, pod corev1.Pod, target, marker string, n int) counts {
	t.Helper()
	return e.callWith(t, pod, target, marker, n, nil, nil)
}

// callWith is call with request headers ("Name: Value") and the names of
// response headers to report in counts.Headers.
func (e *env) callWith(t *testing.T, pod corev1.Pod, target, marker string, n int, headers, show []string) counts {
	t.Helper()
	var c counts
	q := url.Values{"url": {target}, "marker": {marker}, "n": {fmt.Sprint(n)}, "interval": {"10ms"}, "header": headers, "show": show}
	err := e.control(timeout(t, 3*time.Minute), pod, "/call", q, &c)
	require.NoError(t, err)
	return c
}

// tcpExchange sends one line from pod to addr over TCP and returns the
// reply or the error testapp saw.
func (e *env) tcpExchange(ctx context.Context, pod corev1.Pod, addr, payload string) (reply, errText string, err error) {
	var res struct {
		Reply string `json:"reply"`
		Error string `json:"error"`
	}
	err = e.control(ctx, pod, "/tcp", url.Values{"addr": {addr}, "payload": {payload}}, &res)
	return res.Reply, res.Error, err
}

// tlsExchange is tcpExchange over TLS with server name sni (the server's
// certificate is not verified: which backend answers is what counts).
func (e *env) tlsExchange(ctx context.Context, pod corev1.Pod, addr, sni, payload string) (reply, errText string, err error) {
	var res struct {
		Reply string `json:"reply"`
		Error string `json:"error"`
	}
	err = e.control(ctx, pod, "/tls", url.Values{"addr": {addr}, "sni": {sni}, "payload": {payload}}, &res)
	return res.Reply, res.Error, err
}

// load is a background series of calls from a pod.
type load struct {
	e   *env
	pod corev1.Pod
}

func (e *env) startLoad(t *testing.T, pod corev1.Pod, target, marker string) *load {
	t.Helper()
	require.NoError(t, e.control(timeout(t, time.Minute), pod, "/load/start", url.Values{"url": {target}, "marker": {marker}, "interval": {"20ms"}}, nil))
	return &load{e: e, pod: pod}
}

func (l *load) stop(t *testing.T) counts {
	t.Helper()
	var c counts
	require.NoError(t, l.e.control(timeout(t, time.Minute), l.pod, "/load/stop", nil, &c))
	return c
}
