package tapapi

import (
	"encoding/json"
	"net/http"
	"sort"
)

// Discovery documents, in the shapes of Kubernetes' APIGroupList,
// APIGroup and APIResourceList, so the aggregator finds the API available
// and kubectl api-resources lists it. They say nothing a user could not
// read from the APIService, so they are served without authentication, as
// are /healthz, /livez and /readyz.

type groupVersion struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Kind             string         `json:"kind,omitempty"`
	APIVersion       string         `json:"apiVersion,omitempty"`
	Name             string         `json:"name"`
	Versions         []groupVersion `json:"versions"`
	PreferredVersion groupVersion   `json:"preferredVersion"`
}

type apiResource struct {
	Name       string   `json:"name"`
	Namespaced bool     `json:"namespaced"`
	Kind       string   `json:"kind"`
	Verbs      []string `json:"verbs"`
}

func discoveryGroup() apiGroup {
	gv := groupVersion{GroupVersion: Group + "/" + Version, Version: Version}
	return apiGroup{Name: Group, Versions: []groupVersion{gv}, PreferredVersion: gv}
}

func discoveryResources() map[string]any {
	names := []string{"namespaces"}
	for r := range Resources {
		names = append(names, r)
	}
	sort.Strings(names)
	var rs []apiResource
	for _, n := range names {
		rs = append(rs, apiResource{Name: n + "/" + Subresource, Namespaced: n != "namespaces", Kind: "Tap", Verbs: []string{Verb}})
	}
	return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": Group + "/" + Version, "resources": rs}
}

// serveDiscovery answers the discovery and health paths; it returns
// false for any other path.
func serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	var body any
	switch r.URL.Path {
	case "/healthz", "/livez", "/readyz":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
		return true
	case "/apis":
		g := discoveryGroup()
		body = map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []apiGroup{g}}
	case "/apis/" + Group:
		g := discoveryGroup()
		g.Kind, g.APIVersion = "APIGroup", "v1"
		body = g
	case prefix:
		body = discoveryResources()
	default:
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "tapapi: discovery is read with GET")
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
	return true
}

// writeStatus answers with a Kubernetes Status object, which client-go
// turns into an error carrying message.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code,
	})
}
