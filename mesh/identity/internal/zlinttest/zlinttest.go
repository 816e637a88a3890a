// Package zlinttest runs the zlint binary over certificates in tests. zlint
// is not a module dependency: tests shell out to it when it is on PATH. In
// CI (CI=true) a missing zlint fails the test; elsewhere the test is
// skipped with a message saying how to install it.
package zlinttest

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// Install is the command that installs the zlint version these tests use.
const Install = "go install github.com/zmap/zlint/v3/cmd/zlint@v3.7.3"

// Sources are the lint sources every issued certificate must pass.
const Sources = "RFC5280"

type result struct {
	Result  string `json:"result"`
	Details string `json:"details"`
}

// Binary returns the path of zlint, failing the test in CI and skipping it
// elsewhere when zlint is not installed.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("zlint")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("zlint is required in CI but is not on PATH; install it with %q", Install)
	}
	t.Skipf("zlint not on PATH; install it with %q to run this test", Install)
	return ""
}

// Check lints cert with the RFC 5280 lints and fails the test on any error
// or fatal result, and on any warning not listed in allowWarn. It returns
// the warnings seen, so a caller can assert on them.
func Check(t testing.TB, cert *x509.Certificate, allowWarn ...string) []string {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatalf("zlinttest: write certificate: %v", err)
	}
	out, err := exec.Command(bin, "-includeSources", Sources, path).Output()
	if err != nil {
		t.Fatalf("zlinttest: zlint failed: %v", err)
	}
	var results map[string]result
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("zlinttest: zlint output is not JSON: %v\n%s", err, out)
	}
	if len(results) == 0 {
		t.Fatalf("zlinttest: zlint ran no lints")
	}
	allowed := map[string]bool{}
	for _, w := range allowWarn {
		allowed[w] = true
	}
	var warns, failures []string
	for name, r := range results {
		switch r.Result {
		case "error", "fatal":
			failures = append(failures, name+": "+r.Result+" "+r.Details)
		case "warn":
			warns = append(warns, name)
			if !allowed[name] {
				failures = append(failures, name+": warn "+r.Details)
			}
		}
	}
	sort.Strings(failures)
	if len(failures) > 0 {
		t.Errorf("zlint %s findings for %s:\n%v", Sources, cert.Subject, failures)
	}
	return warns
}
