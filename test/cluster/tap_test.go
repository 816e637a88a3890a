//go:build clusterintegration

package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/viz"
	vizk8s "github.com/weftmesh/weft/mesh/viz/kubernetes"
)

// tapAndTop taps backend while client calls frontend (which calls
// backend): `weft viz tap` prints the requests with the verified client
// identity, `weft viz top` counts them; a user without RBAC is refused
// with 403 naming deployments/tap, and may tap once a RoleBinding to the
// install's tap-admin role exists.
func (m *mesh) tapAndTop(t *testing.T) {
	e := m.e
	eventually(t, 3*time.Minute, "the tap API is available", func(ctx context.Context) error {
		return e.rolledOut(ctx, vocab.DefaultControlPlaneNamespace, install.ServiceTap)
	})
	l := e.startLoad(t, m.pods["client"], fmt.Sprintf("http://frontend:%d/", httpPort), "tap")
	defer l.stop(t)

	// tap: the first requests backend's proxy reports, as JSON.
	var events []viz.Event
	eventually(t, 2*time.Minute, "weft viz tap deploy/backend", func(context.Context) error {
		code, out, errs := e.weftCmd(t, nil, "viz", "tap", "deploy/backend", "-n", m.app, "-o", "json", "--max-events", "9", "--duration", "30s")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errs)
		}
		events = events[:0]
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var ev viz.Event
			if len(line) > 0 && json.Unmarshal(line, &ev) == nil {
				events = append(events, ev)
			}
		}
		if len(events) < 9 {
			return fmt.Errorf("%d events: %s", len(events), errs)
		}
		return nil
	})
	var reqs int
	for _, ev := range events {
		assert.Equal(t, m.app, strings.SplitN(ev.Proxy, "/", 2)[0], "events come from backend's pods")
		if ev.Kind == viz.RequestInit && ev.Direction == "inbound" {
			reqs++
			assert.True(t, ev.TLS(), "frontend -> backend is mutual TLS: %+v", ev)
			assert.Equal(t, identityOf("frontend", m.app), ev.SourceMeta["client_id"], "the client identity backend's proxy verified")
		}
	}
	assert.NotZero(t, reqs, "inbound requests tapped: %+v", events)

	// top: the paths backend serves, counted.
	code, out, errs := e.weftCmd(t, nil, "viz", "top", "deploy/backend", "-n", m.app, "-o", "json", "--duration", "10s")
	require.Equal(t, 0, code, errs)
	var top struct {
		Rows []struct {
			Destination string `json:"destination"`
			Count       int    `json:"count"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(out, &top), "%s", out)
	require.NotEmpty(t, top.Rows, "top saw requests: %s", errs)
	assert.Positive(t, top.Rows[0].Count)

	// RBAC decides who may tap which namespace.
	nobody := rest.CopyConfig(e.cfg)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "weft-test-nobody"}
	cs, err := kubernetes.NewForConfig(nobody)
	require.NoError(t, err)
	src := vizk8s.New(cs, vizk8s.WithNamespace(m.app))
	backend := viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: m.app, Name: "backend"}
	ctx := timeout(t, time.Minute)
	_, err = src.TapResource(ctx, backend, viz.TapRequest{}, nil)
	require.Error(t, err)
	// The API server's own authorization refuses first (the tap API
	// checks again behind it), with the resource the user lacks.
	assert.Contains(t, err.Error(), `User "weft-test-nobody" cannot watch resource "deployments/tap" in API group "tap.weftmesh.io"`)

	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "weft-test-nobody-tap", Namespace: m.app},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: install.ClusterRoleName(vocab.DefaultControlPlaneNamespace, install.TapAdminRole)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "weft-test-nobody"}},
	}
	_, err = e.kube.RbacV1().RoleBindings(m.app).Create(ctx, rb, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "weft-test-nobody taps backend once bound to tap-admin", func(ctx context.Context) error {
		tapCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := src.TapResource(tapCtx, backend, viz.TapRequest{}, nil)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	})
	// Bound in the application's namespace only: another stays closed.
	_, err = src.TapResource(ctx, viz.Resource{Kind: viz.KindNamespace, Namespace: vocab.DefaultControlPlaneNamespace}, viz.TapRequest{}, nil)
	require.Error(t, err)
	// A namespace's tap is, to the API server, the namespaced resource
	// "tap" (tap-admin grants every resource of the group).
	assert.Contains(t, err.Error(), `User "weft-test-nobody" cannot watch resource "tap" in API group "tap.weftmesh.io" in the namespace "`+vocab.DefaultControlPlaneNamespace+`"`)
}

// demoTapAndTop taps and tops the demo application's web as Linkerd's
// getting-started guide does with its own demo: `weft viz tap
// deploy/web` shows load's requests arriving over mutual TLS with load's
// identity, `weft viz top deploy/web` counts its two paths.
func (m *mesh) demoTapAndTop(t *testing.T) {
	e := m.e
	ns := m.demoNS
	require.NotEmpty(t, ns, "step 3d deployed the demo application")
	var reqs int
	eventually(t, 2*time.Minute, "weft viz tap deploy/web", func(context.Context) error {
		code, out, errs := e.weftCmd(t, nil, "viz", "tap", "deploy/web", "-n", ns, "--path", "/unary", "-o", "json", "--max-events", "12", "--duration", "30s")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errs)
		}
		reqs = 0
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var ev viz.Event
			if len(line) == 0 || json.Unmarshal(line, &ev) != nil {
				continue
			}
			if ev.Kind == viz.RequestInit && ev.Direction == "inbound" {
				if !ev.TLS() || ev.SourceMeta["client_id"] != identityOf("load", ns) {
					return fmt.Errorf("an inbound request at web not from load over mTLS: %+v", ev)
				}
				if !strings.HasPrefix(ev.Path, "/unary") {
					return fmt.Errorf("--path /unary let through a request for %q", ev.Path)
				}
				reqs++
			}
		}
		if reqs == 0 {
			return fmt.Errorf("no inbound request in %d bytes of events: %s", len(out), errs)
		}
		return nil
	})

	code, out, errs := e.weftCmd(t, nil, "viz", "top", "deploy/web", "-n", ns, "-o", "json", "--duration", "10s")
	require.Equal(t, 0, code, errs)
	var top struct {
		Rows []struct {
			Path  string `json:"path"`
			Count int    `json:"count"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(out, &top), "%s", out)
	paths := map[string]int{}
	for _, r := range top.Rows {
		paths[r.Path] += r.Count
	}
	assert.Positive(t, paths["/unary"], "top counts load's /unary: %s", out)
	assert.Positive(t, paths["/empty"], "top counts load's /empty: %s", out)

	m.demoDashboard(t)
}

// demoDashboard runs `weft viz dashboard` against the cluster as a user
// does, without -n: its frame shows the demo's web (every namespace is
// shown) and its live view streams load's requests to web, tapped
// through the tap API.
func (m *mesh) demoDashboard(t *testing.T) {
	e := m.e
	ns := m.demoNS
	d := e.weftStart(t, "viz", "dashboard", "--addr", "127.0.0.1:0")
	var base string
	eventually(t, time.Minute, "weft viz dashboard serving", func(context.Context) error {
		if m := regexp.MustCompile(`serving (http://\S+)`).FindStringSubmatch(d.stdout()); m != nil {
			base = strings.TrimSuffix(m[1], "/")
			return nil
		}
		return fmt.Errorf("not serving yet; stdout %q, stderr %q", d.stdout(), d.stderr())
	})
	web := ns + "/web"
	eventually(t, 2*time.Minute, "the dashboard's frame shows web's traffic", func(ctx context.Context) error {
		var f struct {
			Nodes []struct {
				ID     string `json:"id"`
				Meshed int    `json:"meshed"`
			} `json:"nodes"`
		}
		if err := getJSON(ctx, base+"/api/frame", &f); err != nil {
			return err
		}
		for _, n := range f.Nodes {
			if n.ID == web && n.Meshed > 0 {
				return nil
			}
		}
		return fmt.Errorf("no meshed node %s in the frame: %+v", web, f.Nodes)
	})
	// The live view: tap batches on the event stream.
	ctx := timeout(t, 2*time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "tap":
			var evs []viz.Event
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &evs), line)
			for _, ev := range evs {
				if ev.Kind == viz.RequestInit && ev.Direction == "inbound" && strings.Contains(ev.Proxy, "web") &&
					ev.TLS() && ev.SourceMeta["client_id"] == identityOf("load", ns) {
					t.Logf("the dashboard's live view: %s %s at %s from %s", ev.Method, ev.Path, ev.Proxy, ev.SourceMeta["client_id"])
					return
				}
			}
		}
	}
	t.Fatalf("the dashboard's live view ended without an inbound request at web from load over mTLS: %v; stderr %q", sc.Err(), d.stderr())
}

// getJSON GETs url and decodes its JSON body into out.
func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out)
}
