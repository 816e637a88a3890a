// Package static feeds a discovery index from YAML or JSON manifests on
// disk, so a mesh on hosts or a laptop behaves exactly like one in a
// cluster.
//
// The files hold the same Kubernetes objects a cluster would: Namespaces,
// Services, EndpointSlices (discovery.k8s.io/v1), Pods and ServiceProfiles
// (linkerd.io/v1alpha2), decoded strictly by apis/manifest. Other kinds
// in the same files (Deployments, policy resources, ...) are skipped, so
// one directory can describe a whole mesh. A namespaced object without a
// namespace is in "default", as kubectl would place it.
//
// New loads the paths (files, or directories walked recursively), checks
// every object (no duplicates, ServiceProfiles that translate) and
// replaces the sink's content with them; it fails when the first load
// fails. It then watches the paths with fsnotify and reloads, after a
// short quiet period, whenever a file changes. A reload that fails (a
// syntax error, an unknown field, a duplicate) changes nothing: the last
// good state keeps being served, the error is logged and reported by Err
// until a later reload succeeds. Updated signals after every reload
// attempt.
//
//	idx, _ := discovery.NewIndex()
//	src, err := static.New(ctx, idx, []string{"/etc/weft/manifests"})
//	if err != nil { ... }
//	defer src.Close()
package static
