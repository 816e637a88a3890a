package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// build compiles the example the way a user would run it.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "embed-discovery")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func TestExampleBuildsAndRunsTheDemo(t *testing.T) {
	bin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	s := string(out)
	assert.Contains(t, s, "greeter.demo.svc.cluster.local:80 has 1 endpoint(s):")
	assert.Contains(t, s, "identity=greeter.demo.serviceaccount.identity.weft.cluster.local")
	assert.Regexp(t, `called greeter\.demo\.svc\.cluster\.local:80 through the resolver: SERVING via 127\.0\.0\.1:\d+`, s)
	assert.Contains(t, s, "greeter.demo.svc.cluster.local:80 has 2 endpoint(s):")
	assert.Contains(t, s, "identity=(no identity: plaintext)")

	// The same binary serving manifest files.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(`
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-a
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.0.0.1"]
`), 0o600))
	out, err = exec.CommandContext(ctx, bin, "--manifests", dir, "--authority", "web.shop.svc.cluster.local:80").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "web.shop.svc.cluster.local:80 has 1 endpoint(s):\n  10.0.0.1:8080 weight=10000 hint=unknown")
}
