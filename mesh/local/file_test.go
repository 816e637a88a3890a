package local_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/local"
)

func TestParseFillsDefaults(t *testing.T) {
	f, err := local.Parse("m.yaml", []byte("workloads:\n- name: api\n  ports: [{port: 80}]\n- name: web\n  calls: [{service: api}]\n"))
	require.NoError(t, err)
	assert.Equal(t, "default", f.Namespace)
	assert.Equal(t, "all-unauthenticated", f.DefaultInboundPolicy)
	assert.Equal(t, "default", f.Workloads[0].Namespace)
	assert.Equal(t, "api", f.Workloads[0].ServiceAccount)
	assert.Equal(t, 1, f.Workloads[0].Replicas)
	assert.Equal(t, 80, f.Workloads[1].Calls[0].LocalPort, "the local port defaults to the service port")
}

func TestParseRejectsBadFilesNamingTheField(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"unknown field":       {"workloads: [{name: a, prots: []}]", `unknown field "prots"`},
		"no workloads":        {"namespace: a", "workloads: at least one workload is needed"},
		"bad name":            {"workloads: [{name: Web_1}]", `workloads[0].name: "Web_1"`},
		"bad namespace":       {"namespace: A\nworkloads: [{name: a}]", `namespace: "A"`},
		"duplicate":           {"workloads: [{name: a}, {name: a}]", "workloads[1].name: \"a\" in namespace \"default\" is already workloads[0]"},
		"port range":          {"workloads: [{name: a, ports: [{port: 70000}]}]", "workloads[0].ports[0].port: 70000 is not between 1 and 65535"},
		"reserved port":       {"workloads: [{name: a, ports: [{port: 4191}]}]", "workloads[0].ports[0].port: 4191 is reserved"},
		"tap port":            {"workloads: [{name: a, ports: [{port: 4190}]}]", "workloads[0].ports[0].port: 4190 is reserved"},
		"port twice":          {"workloads: [{name: a, ports: [{port: 80}, {port: 80}]}]", "workloads[0].ports[1].port: 80 is listed twice"},
		"bad port name":       {"workloads: [{name: a, ports: [{name: 'has space', port: 80}]}]", "workloads[0].ports[0].name"},
		"replicas":            {"workloads: [{name: a, replicas: 99}]", "workloads[0].replicas: 99 is not between 1 and 16"},
		"call unknown":        {"workloads: [{name: a, calls: [{service: b}]}]", `workloads[0].calls[0].service: "b" names no workload`},
		"call port":           {"workloads: [{name: a, calls: [{service: b, port: 81}]}, {name: b, ports: [{port: 80}]}]", "workloads[0].calls[0].port: workload b does not serve port 81"},
		"call needs port":     {"workloads: [{name: a, calls: [{service: b}]}, {name: b, ports: [{port: 80}, {port: 81}]}]", "serves 2 ports: name one"},
		"local port clash":    {"workloads: [{name: a, ports: [{port: 80}], calls: [{service: b}]}, {name: b, ports: [{port: 80}]}]", "workloads[0].calls[0].localPort: 80 is already the workload's own port"},
		"local port reserved": {"workloads: [{name: a, calls: [{service: b, localPort: 4143}]}, {name: b, ports: [{port: 80}]}]", "localPort: 4143 is reserved"},
		"policy workload":     {"workloads: [{name: a}]\npolicies: [{workload: z, port: 80, allow: [a]}]", `policies[0].workload: "z" names no workload`},
		"policy port":         {"workloads: [{name: a, ports: [{port: 80}]}]\npolicies: [{workload: a, port: http, allow: [a]}]", `policies[0].port: workload a has no port named "http"`},
		"policy allow empty":  {"workloads: [{name: a, ports: [{port: 80}]}]\npolicies: [{workload: a, port: 80, allow: []}]", "policies[0].allow: empty"},
		"policy allow bad":    {"workloads: [{name: a, ports: [{port: 80}]}]\npolicies: [{workload: a, port: 80, allow: [q]}]", `policies[0].allow[0]: "q" names no workload`},
		"default policy":      {"defaultInboundPolicy: open\nworkloads: [{name: a}]", `defaultInboundPolicy: "open"`},
		"env":                 {"workloads: [{name: a, env: {WEFT_POD_IP: x}}]", `workloads[0].env: "WEFT_POD_IP"`},
		"not yaml":            {"workloads: [", "m.yaml"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := local.Parse("m.yaml", []byte(c.src))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.True(t, strings.HasPrefix(err.Error(), "local: "), err.Error())
		})
	}
}

func TestParseRefusesOversizedFiles(t *testing.T) {
	_, err := local.Parse("big.yaml", make([]byte, local.MaxFileSize+1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than the")
}

func TestLoadResolvesPolicyFilesNextToTheMeshFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(p, []byte("workloads: [{name: a}]\npolicyFiles: [policy/]\n"), 0o600))
	f, err := local.Load(p)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "policy")}, f.PolicyPaths())
	_, err = local.Load(filepath.Join(dir, "missing.yaml"))
	assert.Error(t, err)
}

func TestPlanGivesEachPodAnAddressAndExpandsIntoStrictManifests(t *testing.T) {
	f, err := local.Parse("m.yaml", []byte(twoWorkloads))
	require.NoError(t, err)
	p, err := local.NewPlan(f, netip.MustParseAddr("127.0.5.0"))
	require.NoError(t, err)
	require.Len(t, p.Pods, 3)
	api := p.Pods[0]
	assert.Equal(t, "api-0", api.Name)
	assert.Equal(t, netip.MustParseAddr("127.0.5.1"), api.IP)
	assert.Equal(t, "127.0.5.1:4143", api.Inbound.String())
	assert.Equal(t, "127.0.5.1:4191", api.Admin.String())
	assert.Equal(t, "api.shop.serviceaccount.identity.weft.cluster.local", api.Identity)
	web := p.Pods[1]
	require.Len(t, web.Mappings, 1)
	assert.Equal(t, "127.0.5.2:9001", web.Mappings[0].Listen.String())
	assert.Equal(t, "api.shop.svc.cluster.local:7000", web.Mappings[0].Authority)

	data, err := p.YAML()
	require.NoError(t, err)
	objs, err := manifest.Decode("plan.yaml", data)
	require.NoError(t, err, "the generated objects decode strictly:\n%s", data)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GroupVersionKind().Kind]++
	}
	assert.Equal(t, map[string]int{"Namespace": 1, "ServiceAccount": 3, "Pod": 3, "Service": 1, "EndpointSlice": 1,
		"Server": 1, "MeshTLSAuthentication": 1, "AuthorizationPolicy": 1}, kinds)

	_, err = local.NewPlan(f, netip.MustParseAddr("10.0.0.0"))
	assert.Error(t, err, "only loopback addresses")
}

func TestEnvironTellsAProgramWhereItIs(t *testing.T) {
	f, err := local.Parse("m.yaml", []byte(twoWorkloads))
	require.NoError(t, err)
	p, err := local.NewPlan(f, netip.MustParseAddr("127.0.5.0"))
	require.NoError(t, err)
	api, web := p.Pods[0].Environ(), p.Pods[1].Environ()
	assert.Equal(t, "127.0.5.1", api["WEFT_POD_IP"])
	assert.Equal(t, "7000", api["WEFT_PORT"])
	assert.Equal(t, "7000", api["WEFT_PORT_ECHO"])
	assert.Equal(t, "127.0.5.2:9001", web["WEFT_OUTBOUND_API"])
	assert.Equal(t, "127.0.5.2:9001", web["WEFT_OUTBOUND_API_7000"])
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", web["WEFT_IDENTITY"])
	assert.Equal(t, []string{"serve", "127.0.5.1:7000", "$(NOPE)"},
		local.ExpandCommand([]string{"serve", "$(WEFT_POD_IP):$(WEFT_PORT)", "$(NOPE)"}, api))
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(twoWorkloads))
	f.Add([]byte("workloads: [{name: a, calls: [{service: a, port: x}]}]"))
	f.Add([]byte("policies: [{workload: a/b, port: 1, allow: [c/d]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mf, err := local.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		p, err := local.NewPlan(mf, netip.MustParseAddr("127.0.1.0"))
		if err != nil {
			return
		}
		if _, err := p.YAML(); err != nil {
			t.Fatalf("a checked file failed to render: %v", err)
		}
	})
}
