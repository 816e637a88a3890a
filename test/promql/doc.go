// Package promql checks that Linkerd's dashboards read Weft's proxies: it
// runs a local mesh (mesh/local: the real control plane and real proxies
// on loopback) with HTTP traffic between two workloads, starts a real
// Prometheus (Debian's prometheus package) on loopback with a generated
// configuration that scrapes every proxy's /metrics each second and labels
// each target with namespace, deployment and pod (what Linkerd's scrape
// configuration derives from Kubernetes), and runs PromQL queries taken
// from Linkerd's public Grafana dashboards (linkerd2 grafana/dashboards:
// deployment, pod, route, authority, top-line), each of which must return
// data.
//
// Prometheus is found through WEFT_PROMETHEUS, then prometheus on PATH.
// Without it the test skips, except under CI=true, where it fails. Install
// it with:
//
//	apt-get install prometheus
package promql
