// Package policycmd holds the offline policy commands: `policy test`,
// `policy explain` and `authz`. They read manifests with apis/manifest and
// evaluate them with mesh/policy, and link nothing else of Weft's (no
// Kubernetes client, no CA backend, no injector), so cmd/weft-policy,
// which offers only these commands, stays a small dependency for a user's
// module (`go tool weft-policy test ...`). The weft CLI lists the same
// commands.
package policycmd
