// Package depstest enforces Weft's dependency seams, in the style of the
// Go distribution's go/build/deps_test.go: a table of rules (in
// deps_test.go) says, for sets of packages, what they must never link, and
// the test fails naming the chain of imports that broke a rule:
//
//	cmd/weft-proxy must not link k8s.io/client-go/... (the proxy links no Kubernetes client):
//	    github.com/weftmesh/weft/cmd/weft-proxy
//	    -> github.com/weftmesh/weft/internal/cli/proxycmd
//	    -> github.com/weftmesh/weft/mesh/dataplane
//	    -> k8s.io/client-go/kubernetes
//
// "Link" means the package's transitive imports in a normal build (test
// files do not count), as `go list -deps` reports them. Patterns are
// import paths; a trailing "/..." matches the path and everything below
// it, so a module is matched by its path plus "/..."; All and Std match
// every package and the standard library.
package depstest

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Graph is the import graph of a set of packages and everything they
// depend on.
type Graph struct {
	// Imports maps an import path to the import paths it imports.
	Imports map[string][]string
	// Local lists the packages of the module itself, sorted.
	Local []string
}

// Load runs `go list -deps` over patterns (such as "./...") in dir and
// returns the graph. module is the module path whose packages make up
// Graph.Local.
func Load(dir, module string, patterns ...string) (*Graph, error) {
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("depstest: go list: %w: %s", err, stderr.String())
	}
	g := &Graph{Imports: map[string][]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		g.Imports[f[0]] = f[1:]
		if Match(module+"/...", f[0]) {
			g.Local = append(g.Local, f[0])
		}
	}
	sort.Strings(g.Local)
	return g, nil
}

// Special patterns.
const (
	// All matches every package.
	All = "..."
	// Std matches the standard library (paths whose first element has no
	// dot, including the standard library's vendored packages).
	Std = "std"
)

// Match reports whether path matches pattern: equal to it, or below it
// when the pattern ends in "/..."; All and Std are special.
func Match(pattern, path string) bool {
	switch pattern {
	case All:
		return true
	case Std:
		first, _, _ := strings.Cut(path, "/")
		return !strings.Contains(first, ".")
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if Match(p, path) {
			return true
		}
	}
	return false
}

// Rule says that the packages matching Packages (except those matching
// Except) must not link any package matching Deny (except those matching
// Allow).
type Rule struct {
	Packages []string
	Except   []string
	Deny     []string
	Allow    []string
	// Why says what the rule protects; it is printed with a violation.
	Why string
}

// Violation is one package linking what its rule denies.
type Violation struct {
	Rule *Rule
	// Chain is the shortest import chain from the package the rule binds
	// to a denied package.
	Chain []string
	// Denied counts the denied packages the bound package links.
	Denied int
}

func (v Violation) String() string {
	more := ""
	if v.Denied > 1 {
		more = fmt.Sprintf(" and %d more denied packages", v.Denied-1)
	}
	return fmt.Sprintf("%s must not link %s%s (%s):\n    %s",
		v.Chain[0], v.Chain[len(v.Chain)-1], more, v.Rule.Why, strings.Join(v.Chain, "\n    -> "))
}

// Bound returns the module's packages the rule applies to.
func (g *Graph) Bound(r *Rule) []string {
	var out []string
	for _, p := range g.Local {
		if matchAny(r.Packages, p) && !matchAny(r.Except, p) {
			out = append(out, p)
		}
	}
	return out
}

// Check returns the violations of r: one for each package the rule binds
// that links a denied package, with the shortest import chain to one.
func (g *Graph) Check(r *Rule) []Violation {
	var out []Violation
	for _, root := range g.Bound(r) {
		// Breadth first, imports in sorted order, so the chain is a
		// shortest one and the same on every run.
		parent := map[string]string{root: ""}
		queue := []string{root}
		var first string
		denied := 0
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if p != root && matchAny(r.Deny, p) && !matchAny(r.Allow, p) {
				if denied == 0 {
					first = p
				}
				denied++
			}
			imps := append([]string(nil), g.Imports[p]...)
			sort.Strings(imps)
			for _, q := range imps {
				if _, seen := parent[q]; !seen {
					parent[q] = p
					queue = append(queue, q)
				}
			}
		}
		if denied > 0 {
			out = append(out, Violation{Rule: r, Chain: chain(parent, first), Denied: denied})
		}
	}
	return out
}

func chain(parent map[string]string, p string) []string {
	var c []string
	for ; p != ""; p = parent[p] {
		c = append(c, p)
	}
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return c
}
