// Package static authenticates workloads with a token file, for hosts
// without Kubernetes and for development. The file is YAML:
//
//	tokens:
//	- token: "3f9c...e1"
//	  namespace: shop
//	  serviceAccount: web
//
// Each token proves the service account next to it. The file is followed:
// when it changes, the new set replaces the old one; a change that does not
// parse is logged and ignored. Tokens are held only as SHA-256 digests.
package static
