// Package ports reads Linkerd's port lists and decides which ports are
// opaque, by one rule that the destination controller (mesh/discovery,
// GetProfile and endpoint hints) and the policy controller (mesh/policy,
// the Inbound and Outbound APIs and the offline evaluator) share, so the
// two never disagree about a port.
//
// A port list is what config.linkerd.io/opaque-ports and the skip-ports
// annotations hold: comma-separated numbers ("3306"), inclusive ranges
// ("4000-4100") and names of container ports ("mysql").
//
//	set, err := ports.Parse("25,4000-4100,mysql", map[string]int32{"mysql": 3306})
//	set.Contains(3306) // true
//
// # Which ports are opaque
//
// For a Service: its config.linkerd.io/opaque-ports annotation, else its
// namespace's, else the default list (DefaultOpaque, or the controllers'
// --default-opaque-ports flag). For a pod: its annotation, else its
// namespace's, else the ports of the default list that one of its
// containers declares: Linkerd's injector writes exactly that list on the
// pods it injects, so a pod that does not declare 5432 does not get 5432
// as opaque. An annotation that does not parse counts as an empty list
// (Linkerd's rule) and is reported as an error.
//
// The package imports only the standard library and apis/vocab.
package ports
