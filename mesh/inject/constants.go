package inject

// Downward-API variables set first in the proxy's environment so the
// variables above can refer to them with $(name).
const (
	envPodName     = "_pod_name"
	envPodNS       = "_pod_ns"
	envPodNodeName = "_pod_nodeName"
	envPodSA       = "_pod_sa"
)

// isSystemNamespace reports whether pods in the namespace are never injected.
func isSystemNamespace(name string) bool {
	switch name {
	case "kube-system", "kube-public", "kube-node-lease":
		return true
	}
	return false
}
