// Package manifest decodes Kubernetes manifests, strictly, into typed
// objects: the Linkerd kinds Weft serves (Server, ServerAuthorization,
// AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication,
// HTTPLocalRateLimitPolicy, EgressNetwork, policy.linkerd.io HTTPRoute,
// ServiceProfile),
// the Gateway API HTTPRoute, GRPCRoute, TCPRoute and TLSRoute (v1, and the
// v1alpha2 Linkerd users write), and the core kinds a mesh reads
// (Namespace, Pod, Service, ServiceAccount, ConfigMap, Secret,
// EndpointSlice, the workload kinds and v1 List).
//
// It is what the file-backed parts of Weft read their configuration with:
// the static backends, `weft policy test` and the tests users write
// against their own manifests. The same YAML that kubectl applies to a
// cluster running Linkerd decodes here into the same objects.
//
// # Reading manifests
//
// Decode takes bytes and a name for messages, DecodeFile a file, and
// LoadPaths any mix of files and directories (walked recursively for
// .yaml, .yml and .json files):
//
//	objs, err := manifest.LoadPaths("deploy/", "policy.yaml")
//	if err != nil {
//		return err // every problem, one per line
//	}
//	for _, o := range objs {
//		switch obj := o.Object.(type) {
//		case *policyv1beta3.Server:
//			...
//		}
//	}
//
// A source is a stream of YAML documents separated by "---" lines, or of
// JSON values. Lists (v1 List or typed lists such as ServerList) are
// expanded into their items. Each Object records its source, its document
// number and its item number.
//
// # Strictness
//
// A manifest that is accepted means what it says. These are errors:
//
//   - an unknown field, such as a misspelled "podSelectr";
//   - a field given twice in one mapping;
//   - a value of the wrong type (YAML 1.1 reads yes, no, on, off, y and n
//     as booleans, as kubectl does, so `namespace: n` is an error);
//   - a missing apiVersion, kind or metadata.name;
//   - a kind or apiVersion outside the list above;
//   - for the Linkerd kinds, a value their CRD schema forbids: a missing
//     required field, a value outside an enum (a Server's accessPolicy
//     "allow"), a string not matching a pattern, too few or too many
//     items, a number out of range, a Server with both or neither of its
//     selectors, an HTTPRoute filter whose body does not match its type;
//   - a document larger than MaxDocumentBytes, a file larger than
//     MaxFileBytes, a YAML syntax error, content after a "..." end marker.
//
// Every document of every source is checked, so one run reports all the
// problems (up to a hundred). Each is an *Error naming the source, the
// document (1-based), the object and the field, with the line when it is
// known:
//
//	manifest: web.yaml: document 2 (Server my-app/web-http): unknown field "spec.podSelectr" (line 14)
//
// On any error no objects are returned: a caller never acts on half a
// configuration. Empty and comment-only documents are skipped.
//
// # Defaults
//
// A Linkerd object comes back as the API server would store it: the
// defaults of its CRD schema (the CRDs of package
// github.com/weftmesh/weft/apis/crds) are filled in, so a Server without
// accessPolicy reads as "deny" here as in a cluster, and an HTTPRoute rule
// without matches gets the "/" prefix match. The CEL rules that the
// Gateway API types inside HTTPRoute carry (path syntax, filter
// combinations) are not evaluated here, only the ones Weft's own markers
// generate. Core and Gateway API objects come back as written, without the
// defaults the API server would add and without its validation.
//
// Scheme returns a fresh runtime.Scheme with exactly the accepted kinds,
// for callers that need one (for example to convert objects from a dynamic
// client).
package manifest
