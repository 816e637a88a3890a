// Package cluster is Weft's end-to-end suite on a real Kubernetes node:
// the reference install applied to the local single-node cluster of
// internal/tools/cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kube-proxy, CoreDNS, containerd, runc, the CNI
// bridge), running this tree's images, with an application meshed by the
// real injector.
//
// The tests are behind the build tag clusterintegration. Run them with
//
//	make cluster-up && make cluster-images && make test-cluster && make cluster-down
//
// They need root (they enter the node's network namespace to reach pods
// and to capture packets on its bridge). Outside CI they skip when no
// cluster is up or its images are not loaded, saying which command to run;
// with CI=true they fail instead. docs/cluster.md describes the cluster and
// what each step proves.
//
// testapp/ is the application the suite meshes.
package cluster
