// Package static is the file backend of mesh/policy: a policy.Source that
// reads Kubernetes manifests (Namespaces, workloads, ServiceAccounts,
// Services and every policy resource) from files and directories, and
// reloads them when they change.
//
// It is what `weft dev` and hosts without a cluster use, and what the
// behaviour suite shares with the Kubernetes backend: both produce the
// same policy.Objects, so the same YAML means the same thing either way.
//
//	src, err := static.New(ctx, []string{"deploy/policy"})
//	if err != nil { ... }          // the first load must succeed
//	defer src.Close()
//	x, err := policy.NewIndexer(ctx, src)
//	go x.Run(ctx)
//
// Every manifest is decoded strictly (apis/manifest): an unknown field or
// kind is an error naming the file, document and field. A reload that
// fails keeps the last good objects; Err reports the failure until a
// later reload succeeds, and Updated fires either way so that a watcher
// can surface the error.
//
// Changes are noticed through filesystem notifications (fsnotify) and,
// as a safety net, by polling file sizes and modification times
// (WithPollInterval, 2s by default). Several quick writes cause one
// reload (WithDebounce, 100ms).
package static
