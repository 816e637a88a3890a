package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	kversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// Categories of checks, in the order they run.
const (
	CategoryAPI          = "kubernetes-api"
	CategoryPreInstall   = "pre-install"
	CategoryCRDs         = "crds"
	CategoryControlPlane = "control-plane"
	CategoryIdentity     = "identity"
	CategoryWebhooks     = "webhooks"
	CategoryDataPlane    = "data-plane"
)

// MinKubernetesMajor and MinKubernetesMinor name the oldest Kubernetes the
// default install runs on: native sidecars (the proxy as an init container
// with restartPolicy Always) need 1.29.
const (
	MinKubernetesMajor = 1
	MinKubernetesMinor = 29
)

// Scope selects which checks run.
type Scope struct {
	// Pre runs the checks that matter before an install (API access,
	// version, permissions, no existing control plane, compatible CRDs)
	// instead of those of an installed control plane.
	Pre bool
	// Proxy adds the data-plane checks: every meshed pod's proxy is ready,
	// runs the control plane's proxy image and carries the current trust
	// roots.
	Proxy bool
}

// Checker runs checks against one cluster. It only reads, except for the
// SelfSubjectAccessReviews of the pre-install checks.
type Checker struct {
	kube kubernetes.Interface
	ext  apiextclient.Interface
	cfg  config
}

// Option tunes a Checker.
type Option func(*config)

type config struct {
	namespace string
	now       func() time.Time
	logger    *slog.Logger
	maxListed int
}

// WithNamespace sets the control-plane namespace (default "weft").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithClock sets the time certificates are checked against (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithLogger logs each API error in full (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// New returns a Checker over a clientset and an apiextensions clientset
// (for the CRDs).
func New(kube kubernetes.Interface, ext apiextclient.Interface, opts ...Option) (*Checker, error) {
	if kube == nil || ext == nil {
		return nil, errors.New("check: nil client")
	}
	cfg := config{namespace: vocab.DefaultControlPlaneNamespace, now: time.Now, logger: slog.New(slog.DiscardHandler), maxListed: 10}
	for _, o := range opts {
		o(&cfg)
	}
	if !dnsLabel.MatchString(cfg.namespace) {
		return nil, fmt.Errorf("check: namespace %q is not a namespace name", cfg.namespace)
	}
	return &Checker{kube: kube, ext: ext, cfg: cfg}, nil
}

// run accumulates results.
type run struct {
	c       *Checker
	ns      string
	now     time.Time
	results []Result
	// Read from the cluster by earlier checks, for later ones.
	values     *inject.Values
	anchorsPEM string
}

func (r *run) add(category, name string, s Status, msg, hint string) Result {
	res := Result{Category: category, Name: name, Status: s, Message: msg, Hint: hint}
	r.results = append(r.results, res)
	return res
}

func (r *run) ok(cat, name, msg string) Result { return r.add(cat, name, StatusOK, msg, "") }
func (r *run) warn(cat, name, msg, hint string) Result {
	return r.add(cat, name, StatusWarn, msg, hint)
}
func (r *run) fail(cat, name, msg, hint string) Result {
	return r.add(cat, name, StatusFail, msg, hint)
}
func (r *run) skip(cat, name, msg string) Result { return r.add(cat, name, StatusSkip, msg, "") }

// notReady records a failure because something is not ready yet (pods
// starting, endpoints not yet published): one that may pass later with
// nobody acting, which Wait retries.
func (r *run) notReady(cat, name, msg, hint string) Result {
	res := r.add(cat, name, StatusFail, msg, hint)
	r.results[len(r.results)-1].NotReady = true
	res.NotReady = true
	return res
}

// apiError turns an API error into a short message and logs the full one.
func (r *run) apiError(what string, err error) string {
	r.c.cfg.logger.Debug("check: API error", "what", what, "error", err)
	return fmt.Sprintf("%s: %v", what, err)
}

// Check runs the checks of scope and returns every result. It stops early
// only when the API server cannot be reached at all.
func (c *Checker) Check(ctx context.Context, scope Scope) Report {
	r := &run{c: c, ns: c.cfg.namespace, now: c.cfg.now()}
	if !r.api(ctx) {
		return r.report()
	}
	if scope.Pre {
		r.preInstall(ctx)
		return r.report()
	}
	r.crds(ctx)
	r.gatewayCRDs(ctx)
	if r.controlPlane(ctx) {
		r.identity(ctx)
		r.webhooks(ctx)
		if scope.Proxy {
			r.dataPlane(ctx)
		}
	}
	return r.report()
}

func (r *run) report() Report {
	rep := Report{Results: r.results, Success: true}
	for _, res := range r.results {
		if res.Status == StatusFail {
			rep.Success = false
		}
	}
	return rep
}

// api checks that the API server answers and is recent enough; false means
// nothing else can be checked.
func (r *run) api(ctx context.Context) bool {
	const reach, version = "can query the Kubernetes API", "Kubernetes version is supported"
	var (
		v   *kversion.Info
		err error
	)
	if d, ok := r.c.kube.Discovery().(discovery.ServerVersionInterfaceWithContext); ok {
		v, err = d.ServerVersionWithContext(ctx)
	} else {
		v, err = r.c.kube.Discovery().ServerVersion()
	}
	if err != nil {
		r.fail(CategoryAPI, reach, r.apiError("server version", err), "check --kubeconfig, the KUBECONFIG variable and the current context; is the API server reachable from here?")
		r.skip(CategoryAPI, version, "the API server did not answer")
		return false
	}
	if err := ctx.Err(); err != nil {
		r.fail(CategoryAPI, reach, err.Error(), "raise --timeout")
		return false
	}
	r.ok(CategoryAPI, reach, "server "+v.GitVersion)
	major, minor, perr := parseVersion(v.Major, v.Minor, v.GitVersion)
	switch {
	case perr != nil:
		r.warn(CategoryAPI, version, perr.Error(), "make sure the cluster runs Kubernetes 1.29 or later")
	case major < MinKubernetesMajor || (major == MinKubernetesMajor && minor < MinKubernetesMinor):
		r.warn(CategoryAPI, version, fmt.Sprintf("%d.%d is older than %d.%d, which native sidecars need", major, minor, MinKubernetesMajor, MinKubernetesMinor),
			"upgrade the cluster, or set proxy.nativeSidecar: false in the install values")
	default:
		r.ok(CategoryAPI, version, fmt.Sprintf("%d.%d (at least %d.%d)", major, minor, MinKubernetesMajor, MinKubernetesMinor))
	}
	return true
}

// parseVersion reads major and minor from version.Info, which some
// providers decorate ("1", "29+"); GitVersion ("v1.29.3") is the fallback.
func parseVersion(major, minor, git string) (int, int, error) {
	num := func(s string) (int, error) { return strconv.Atoi(strings.TrimRight(s, "+")) }
	ma, err1 := num(major)
	mi, err2 := num(minor)
	if err1 == nil && err2 == nil {
		return ma, mi, nil
	}
	parts := strings.SplitN(strings.TrimPrefix(git, "v"), ".", 3)
	if len(parts) >= 2 {
		ma, err1 = num(parts[0])
		mi, err2 = num(parts[1])
		if err1 == nil && err2 == nil {
			return ma, mi, nil
		}
	}
	return 0, 0, fmt.Errorf("cannot read the server version (major %q, minor %q, gitVersion %q)", major, minor, git)
}

// podProblem describes why a pod is not ready, from its status.
func podProblem(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "terminating"
	}
	var why []string
	why = append(why, "phase "+phaseOf(p))
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			why = append(why, "not scheduled"+suffix(c.Reason, c.Message))
		}
	}
	if p.Spec.NodeName == "" && !hasCondition(p, corev1.PodScheduled) {
		why = append(why, "not scheduled to a node")
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			why = append(why, fmt.Sprintf("container %s waiting%s", cs.Name, suffix(cs.State.Waiting.Reason, cs.State.Waiting.Message)))
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			why = append(why, fmt.Sprintf("container %s exited %d%s", cs.Name, cs.State.Terminated.ExitCode, suffix(cs.State.Terminated.Reason, "")))
		case cs.State.Running != nil && !cs.Ready:
			why = append(why, fmt.Sprintf("container %s running but not ready", cs.Name))
		}
		if cs.RestartCount > 0 {
			why = append(why, fmt.Sprintf("container %s restarted %d times", cs.Name, cs.RestartCount))
		}
	}
	return strings.Join(why, ", ")
}

func phaseOf(p *corev1.Pod) string {
	if p.Status.Phase == "" {
		return "unset (no kubelet has reported on it)"
	}
	return string(p.Status.Phase)
}

func suffix(reason, msg string) string {
	switch {
	case reason != "" && msg != "":
		return fmt.Sprintf(" (%s: %s)", reason, msg)
	case reason != "":
		return " (" + reason + ")"
	case msg != "":
		return " (" + msg + ")"
	}
	return ""
}

func hasCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// list joins at most n items and says how many more there are.
func list(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}
