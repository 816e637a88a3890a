package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeSysctls are the global (not per network namespace) sysctls the
// kubelet sets at start, with the values it wants. Inside the node's mount
// namespace a file holding that value is bound over each, so the kubelet
// reads what it wants and never writes the host's kernel settings.
var nodeSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

func (l Layout) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # The VM's capability bounding set lacks CAP_SYS_RESOURCE: without this
  # every sandbox fails to start ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  enable_unprivileged_ports = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, l.path("containerd", "root"), l.ContainerdSocket(), PauseImage, l.path("cni"), l.path("containerd", "opt"))
}

func cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "weft",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, bridgeName, PodCIDR)
}

func (l Layout) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# kubelet 1.37 refuses cgroup v1 unless told; containerd 1.6 cannot report
# its cgroup driver, so name it.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDomain: %s
clusterDNS: [%s]
resolvConf: ""
volumePluginDir: %s
failSwapOn: false
syncFrequency: 10s
serializeImagePulls: false
# Images are imported, never pulled: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
enforceNodeAllocatable: [pods]
`, l.CgroupRoot(), l.ContainerdSocket(), l.pki("ca.crt"), NodeIP, ClusterDomain, DNSServiceIP, l.path("kubelet-plugins"))
}

func (l Layout) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Zero leaves the (global) conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 30s
  minSyncPeriod: 0s
`, l.pki("kube-proxy.kubeconfig"), NodeName, ClusterCIDR)
}

// writeConfigs writes every component's configuration and the files the
// node's mount namespace binds.
func writeConfigs(l Layout) error {
	files := map[string]string{
		l.path(markerFile):                  "state directory of the local Weft cluster " + l.Name + "; make cluster-down removes it\n",
		l.path("containerd", "config.toml"): l.containerdConfig(),
		l.path("cni", "10-weft.conflist"):   cniConfig(),
		l.path("kubelet.yaml"):              l.kubeletConfig(),
		l.path("kube-proxy.yaml"):           l.kubeProxyConfig(),
	}
	for name, value := range nodeSysctls {
		files[l.path("node", "sysctl", strings.ReplaceAll(name, "/", "."))] = value + "\n"
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{l.LogDir(), l.PIDDir(), l.path("node", "var-lib"), l.path("node", "var-log"), l.path("kubelet-plugins"), l.path("etcd"), l.path("containerd", "root"), l.path("flex")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// nodeSetup is the shell script run once inside the node's namespaces: the
// node's interfaces and address, and its private /var/lib, /var/log, /run
// and sysctl files.
func (l Layout) nodeSetup() string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\n")
	fmt.Fprintf(&b, "ip link set lo up\n")
	fmt.Fprintf(&b, "ip link add %s type veth peer name %s\n", nodeIface, nodePeerIface)
	fmt.Fprintf(&b, "ip addr add %s%s dev %s\n", NodeIP, nodeNet, nodeIface)
	fmt.Fprintf(&b, "ip addr add %s%s dev %s\n", nodePeerIP, nodeNet, nodePeerIface)
	fmt.Fprintf(&b, "ip link set %s up\nip link set %s up\n", nodeIface, nodePeerIface)
	// Without a default route nothing (the API server calling a webhook's
	// ClusterIP) can be routed before kube-proxy's DNAT; it leads nowhere.
	fmt.Fprintf(&b, "ip route add default dev %s\n", nodeIface)
	fmt.Fprintf(&b, "mount --bind %q /var/lib\n", l.path("node", "var-lib"))
	fmt.Fprintf(&b, "mount --bind %q /var/log\n", l.path("node", "var-log"))
	fmt.Fprintf(&b, "mount -t tmpfs -o mode=0755 weft-node-run /run\n")
	for name := range nodeSysctls {
		fmt.Fprintf(&b, "mount --bind %q /proc/sys/%s\n", l.path("node", "sysctl", strings.ReplaceAll(name, "/", ".")), name)
	}
	return b.String()
}
