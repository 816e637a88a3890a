// Package proxycmd holds the commands of the pod-side binaries: weft-proxy
// (`run` from its WEFT_PROXY_* settings, `await`, `version`) and weft-init
// (the redirect rules, `validate` in CNI mode). It links neither client-go
// nor the CA backends, so those binaries stay small.
package proxycmd
