package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Binaries are the programs a cluster runs. NodeDir holds kubelet,
// kube-controller-manager, kube-scheduler, kube-proxy and kubectl (as
// hack/cluster.sh builds them); Self is this tool's own binary (it serves
// as the API server forwarder); Pause is the sandbox program.
type Binaries struct {
	Etcd, APIServer, NodeDir, CoreDNS, Pause, Self string
}

func (b Binaries) check() error {
	for name, p := range map[string]string{
		"etcd": b.Etcd, "kube-apiserver": b.APIServer, "coredns": b.CoreDNS, "pause": b.Pause, "self": b.Self,
		"kubelet": filepath.Join(b.NodeDir, "kubelet"), "kube-controller-manager": filepath.Join(b.NodeDir, "kube-controller-manager"),
		"kube-scheduler": filepath.Join(b.NodeDir, "kube-scheduler"), "kube-proxy": filepath.Join(b.NodeDir, "kube-proxy"),
		"kubectl": filepath.Join(b.NodeDir, "kubectl"),
	} {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("cluster: %s: %q is not an executable file (hack/cluster.sh build makes it)", name, p)
		}
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("cluster: %s is missing (apt-get install containerd runc containernetworking-plugins iptables iproute2 util-linux)", tool)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return errors.New("cluster: /usr/lib/cni/bridge is missing (apt-get install containernetworking-plugins)")
	}
	return nil
}

// Up starts the cluster of layout l, or finds it running. It returns once
// the node is Ready and CoreDNS serves. A failed Up removes what it made.
func Up(ctx context.Context, l Layout, bins Binaries, log *slog.Logger) (*State, error) {
	if s, err := Load(l); err == nil {
		log.Info("cluster is already up", "name", l.Name, "kubeconfig", s.Kubeconfig)
		return s, nil
	} else if !errors.Is(err, ErrNoCluster) {
		log.Warn("removing a broken cluster before starting anew", "reason", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster: the node needs root (namespaces, mounts, cgroups, containerd)")
	}
	if err := bins.check(); err != nil {
		return nil, err
	}
	if err := Down(l, log); err != nil { // leftovers of an earlier, failed run
		return nil, err
	}
	s, err := up(ctx, l, bins, log)
	if err != nil {
		if derr := Down(l, log); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	return s, nil
}

func up(ctx context.Context, l Layout, bins Binaries, log *slog.Logger) (*State, error) {
	began := time.Now()
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeConfigs(l); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	s := &State{Name: l.Name, Dir: l.Dir, ForwardAddr: ln.Addr().String(), Kubeconfig: l.Kubeconfig(), BinDir: bins.NodeDir}
	if err := writePKI(l, s.ForwardAddr); err != nil {
		return nil, err
	}
	if err := makeCgroupRoot(l.CgroupRoot()); err != nil {
		return nil, err
	}

	// The holder: a process that keeps the node's namespaces.
	holder, err := l.start("holder", []string{"unshare", "--net", "--mount", "--propagation", "private", "--", "sleep", "infinity"})
	if err != nil {
		return nil, err
	}
	s.Holder = holder.Proc
	// Wait until the holder has entered its namespaces (unshare execs sleep
	// after unsharing).
	if err := waitFor(ctx, 10*time.Second, "the namespace holder", func() error {
		if err := holder.exited(); err != nil {
			return err
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", holder.PID))
		if string(comm) != "sleep\n" {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if s.NetNS, err = nsInode(fmt.Sprintf("/proc/%d/ns/net", holder.PID)); err != nil {
		return nil, err
	}
	if s.MntNS, err = nsInode(fmt.Sprintf("/proc/%d/ns/mnt", holder.PID)); err != nil {
		return nil, err
	}
	if err := s.saveState(l); err != nil { // Down finds the namespaces from here on
		return nil, err
	}
	setup := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(holder.PID), "--net", "--mount", "--", "sh", "-c", l.nodeSetup())
	if out, err := setup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cluster: node setup: %w: %s", err, out)
	}

	var procs []*running
	startIn := func(name string, argv ...string) (*running, error) {
		r, err := l.start(name, inNode(holder.PID, argv...))
		if err != nil {
			return nil, err
		}
		procs = append(procs, r)
		s.Procs = append(s.Procs, r.Proc)
		return r, s.saveState(l)
	}
	anyExited := func() error {
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		return nil
	}
	nodeHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, s.NetNSPath(), network, addr)
		},
	}}
	getOK := func(url string) func() error {
		return func() error {
			if err := anyExited(); err != nil {
				return err
			}
			resp, err := nodeHTTP.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
			}
			return nil
		}
	}

	log.Info("starting containerd and etcd")
	if _, err := startIn("containerd", "containerd", "--config", l.path("containerd", "config.toml")); err != nil {
		return nil, err
	}
	if _, err := startIn("etcd", bins.Etcd, "--data-dir", l.path("etcd"), "--name", "weft-node",
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "weft-node=http://127.0.0.1:2380", "--unsafe-no-fsync", "--quota-backend-bytes", strconv.Itoa(2<<30)); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 60*time.Second, "containerd", func() error {
		if err := anyExited(); err != nil {
			return err
		}
		return exec.CommandContext(ctx, "ctr", "--address", l.ContainerdSocket(), "version").Run()
	}); err != nil {
		return nil, err
	}
	if err := importSystemImages(ctx, l, bins); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 60*time.Second, "etcd", getOK("http://127.0.0.1:2379/health")); err != nil {
		return nil, err
	}

	log.Info("starting kube-apiserver")
	if _, err := startIn("kube-apiserver", l.apiServerArgs(bins.APIServer)...); err != nil {
		return nil, err
	}
	// The forwarder: this tool, in the node's network namespace, serving
	// the listener opened above on the host's loopback.
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, err
	}
	fwd, err := l.start("forwarder", inNode(holder.PID, bins.Self, "forward", "--to", fmt.Sprintf("127.0.0.1:%d", apiServerPort)), lf)
	lf.Close()
	if err != nil {
		return nil, err
	}
	procs = append(procs, fwd)
	s.Procs = append(s.Procs, fwd.Proc)
	if err := s.saveState(l); err != nil {
		return nil, err
	}
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 2*time.Minute, "kube-apiserver", func() error {
		if err := anyExited(); err != nil {
			return err
		}
		_, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}

	log.Info("starting the controller manager, scheduler, kubelet and kube-proxy")
	nd := func(b string) string { return filepath.Join(bins.NodeDir, b) }
	if _, err := startIn("kube-controller-manager", nd("kube-controller-manager"),
		"--kubeconfig", l.pki("controller-manager.kubeconfig"),
		"--authentication-kubeconfig", l.pki("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", l.pki("controller-manager.kubeconfig"),
		"--bind-address", "127.0.0.1", "--leader-elect=false",
		"--use-service-account-credentials", "--service-account-private-key-file", l.pki("sa.key"),
		"--root-ca-file", l.pki("ca.crt"),
		"--cluster-signing-cert-file", l.pki("ca.crt"), "--cluster-signing-key-file", l.pki("ca.key"),
		"--service-cluster-ip-range", ServiceCIDR, "--allocate-node-cidrs=false",
		"--flex-volume-plugin-dir", l.path("flex")); err != nil {
		return nil, err
	}
	if _, err := startIn("kube-scheduler", nd("kube-scheduler"),
		"--kubeconfig", l.pki("scheduler.kubeconfig"),
		"--authentication-kubeconfig", l.pki("scheduler.kubeconfig"),
		"--authorization-kubeconfig", l.pki("scheduler.kubeconfig"),
		"--bind-address", "127.0.0.1", "--leader-elect=false"); err != nil {
		return nil, err
	}
	if _, err := startIn("kubelet", nd("kubelet"), "--config", l.path("kubelet.yaml"),
		"--kubeconfig", l.pki("kubelet.kubeconfig"), "--hostname-override", NodeName, "--node-ip", NodeIP); err != nil {
		return nil, err
	}
	if _, err := startIn("kube-proxy", nd("kube-proxy"), "--config", l.path("kube-proxy.yaml")); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 3*time.Minute, "the node to be Ready", func() error {
		if err := anyExited(); err != nil {
			return err
		}
		n, err := kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s: Ready=%s: %s", NodeName, c.Status, c.Message)
			}
		}
		return errors.New("node has no Ready condition yet")
	}); err != nil {
		return nil, err
	}
	log.Info("node ready; starting CoreDNS", "after", time.Since(began).Round(time.Second))
	if err := applyCoreDNS(ctx, kube); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 3*time.Minute, "CoreDNS", func() error {
		if err := anyExited(); err != nil {
			return err
		}
		return coreDNSReady(ctx, kube)
	}); err != nil {
		return nil, err
	}
	log.Info("cluster up", "name", l.Name, "after", time.Since(began).Round(time.Second))
	return s, s.saveState(l)
}

func (l Layout) apiServerArgs(bin string) []string {
	return []string{bin,
		"--etcd-servers", "http://127.0.0.1:2379",
		"--advertise-address", NodeIP, "--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiServerPort),
		"--tls-cert-file", l.pki("apiserver.crt"), "--tls-private-key-file", l.pki("apiserver.key"),
		"--client-ca-file", l.pki("ca.crt"),
		"--kubelet-client-certificate", l.pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", l.pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--service-cluster-ip-range", ServiceCIDR,
		"--service-account-issuer", serviceAccount,
		"--service-account-key-file", l.pki("sa.pub"), "--service-account-signing-key-file", l.pki("sa.key"),
		"--api-audiences", serviceAccount,
		"--allow-privileged=true",
		"--profiling=false",
		"--cert-dir", l.path("pki", "apiserver-generated"),
		// Aggregation (APIServices such as the tap API), as kubeadm
		// configures it.
		"--requestheader-client-ca-file", l.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names", frontProxyClient,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", l.pki("front-proxy-client.crt"), "--proxy-client-key-file", l.pki("front-proxy-client.key"),
	}
}

// frontProxyClient is the common name of the API server's front-proxy
// client certificate.
const frontProxyClient = "front-proxy-client"

// saveState writes state.json.
func (s *State) saveState(l Layout) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := l.StateFile() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.StateFile())
}

// waitFor polls check until it returns nil, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		var fatal *exitedError
		if errors.As(last, &fatal) {
			return last
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

type exitedError struct{ error }
