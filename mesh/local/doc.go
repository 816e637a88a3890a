// Package local runs a whole Weft mesh on one machine, with no root, no
// cluster and no network beyond loopback. It is what `weft demo`, `weft dev`
// and examples/quickstart share.
//
// A newcomer can read it in this order:
//
//  1. The mesh file (file.go): File, a compact YAML description of
//     workloads (name, namespace, service account, ports, replicas, the
//     services each calls, the command `weft dev` starts), compact
//     allow-list policies, and plain Linkerd policy files. Parse and Load
//     decode it strictly and report every bad field by its path
//     (workloads[1].ports[0].port: ...).
//  2. The plan (plan.go): NewPlan, a pure function, lays the file out on
//     this machine: one pod per replica, each with a loopback address
//     (127.0.N.1, .2, ...) where its program listens on its ports, its proxy
//     on 4143 (inbound), 4191 (admin) and 4190 (tap), and its outbound mappings on the
//     local ports of its calls. It also expands the file into the Kubernetes
//     objects a cluster would hold: Namespaces, ServiceAccounts, Pods
//     (labelled linkerd.io/control-plane-ns, so discovery treats them as
//     meshed), Services, EndpointSlices, and for each compact policy a
//     Server, a MeshTLSAuthentication and an AuthorizationPolicy.
//  3. The runner (runner.go, controlplane.go): Runner.Run writes the
//     objects, a fresh trust anchor and issuer, and one static token per
//     pod into a temporary directory; starts identity (local issuer, static
//     tokens), destination and policy (static sources over those files) as
//     gRPC servers on 127.0.0.1 ephemeral ports; starts one mesh/dataplane
//     proxy per pod in explicit mode, connected to the control plane over
//     loopback gRPC through mesh/dataplane/control (the same path as
//     weft-proxy); waits until every proxy is ready; then runs the programs:
//     in-process App functions (WithApp) or the file's commands (WithProcesses).
//  4. Tap (tap.go): every proxy serves io.linkerd.proxy.tap over mutual
//     TLS on its pod address, port 4190, to one identity, TapperIdentity;
//     the runner issues that identity's certificate from the mesh's issuer
//     into DIR/tap (State.Tap, LoadTap), so `weft viz tap/top` and the
//     dashboard can tap the mesh and no one else can.
//
// When ctx ends, or any part fails, the programs stop first, then the
// proxies (draining for WithShutdownGracePeriod), then the control plane,
// and the temporary directory is removed. Nothing listens or is written
// elsewhere.
//
//	f, _ := local.Parse("mesh.yaml", data)
//	r, _ := local.New(ctx, f, local.WithApp("api", serveAPI))
//	go r.Run(ctx)
//	<-r.Ready()
//	st := r.State() // addresses, identities, proxies' metrics registries
//
// Programs learn where they are from Pod (in-process) or from environment
// variables (processes; see Pod.Environ): WEFT_POD_IP, WEFT_PORT,
// WEFT_OUTBOUND_<SERVICE> and others.
//
// # Limits
//
// Explicit mode has no iptables: a program reaches its dependencies only
// through the local ports of its calls, and nothing stops a program from
// connecting to another's pod address directly (policy is enforced on
// connections that arrive at a proxy). Loopback is shared, so each proxy
// forwards only to its program's own ports (dataplane's InboundPortsOnly):
// a peer's transport header cannot reach another pod's proxy, the control
// plane or anything else listening on the machine. At most 250 pods, 16 replicas per
// workload. docs/local-mesh.md is the user guide.
package local
