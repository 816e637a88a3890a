// Package e2e holds the data plane's end-to-end test: two "pods", each a
// network namespace the test creates, joined by a veth pair; in each an
// application, a weft-proxy and weft-init's iptables rules. It needs root,
// ip and iptables; under CI=true it fails when they are missing.
package e2e
