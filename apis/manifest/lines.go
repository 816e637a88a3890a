package manifest

import (
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// The functions here read a document a second time, as a YAML node tree,
// only when something is wrong with it: to find duplicate keys with their
// paths, and to put a line number on a field path. JSON documents are YAML
// too, so they get lines the same way.

// parseTree parses one document into its root node, or returns nil.
func parseTree(data []byte) *yamlv3.Node {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil
	}
	if doc.Kind == yamlv3.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}
	return nil
}

// duplicate is a mapping key that appears twice.
type duplicate struct {
	path string
	line int // line of the second occurrence, relative to the document
}

// findDuplicates lists every key that repeats within one mapping, with the
// path to it in the same notation as the JSON decoder's field paths.
func findDuplicates(root *yamlv3.Node) []duplicate {
	var out []duplicate
	var walk func(n *yamlv3.Node, path string, depth int)
	walk = func(n *yamlv3.Node, path string, depth int) {
		if n == nil || depth > maxTreeDepth {
			return
		}
		switch n.Kind {
		case yamlv3.MappingNode:
			seen := make(map[string]bool, len(n.Content)/2)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Kind != yamlv3.ScalarNode || k.Value == "<<" {
					continue
				}
				p := joinPath(path, k.Value)
				if seen[k.Value] {
					out = append(out, duplicate{path: p, line: k.Line})
				}
				seen[k.Value] = true
				walk(v, p, depth+1)
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]", depth+1)
			}
		}
	}
	walk(root, "", 0)
	return out
}

// maxTreeDepth bounds the walks over hostile, deeply nested documents.
const maxTreeDepth = 10000

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOf returns the line (relative to the document) of the key or element
// at a field path such as "spec.rules[0].matches[1].path", or 0 when the
// path cannot be followed. Keys may contain dots, so at each mapping every
// key that fits the rest of the path is tried, longest first. A path
// without a list index where the tree has a list (type errors are reported
// that way) is tried against each element in turn.
func lineOf(root *yamlv3.Node, path string) int {
	return lineAt(root, path, 0)
}

func lineAt(n *yamlv3.Node, path string, depth int) int {
	if n == nil || depth > maxTreeDepth {
		return 0
	}
	for n.Kind == yamlv3.AliasNode && n.Alias != nil && depth < maxTreeDepth {
		n, depth = n.Alias, depth+1
	}
	switch {
	case n.Kind == yamlv3.SequenceNode && strings.HasPrefix(path, "["):
		end := strings.IndexByte(path, ']')
		if end < 0 {
			return 0
		}
		i, err := strconv.Atoi(path[1:end])
		if err != nil || i < 0 || i >= len(n.Content) {
			return 0
		}
		rest := strings.TrimPrefix(path[end+1:], ".")
		if rest == "" {
			return n.Content[i].Line
		}
		return lineAt(n.Content[i], rest, depth+1)
	case n.Kind == yamlv3.SequenceNode:
		for _, c := range n.Content {
			if l := lineAt(c, path, depth+1); l > 0 {
				return l
			}
		}
		return 0
	case n.Kind == yamlv3.MappingNode:
		type cand struct{ key, value *yamlv3.Node }
		var cands []cand
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yamlv3.ScalarNode && keyFits(path, k.Value) {
				cands = append(cands, cand{k, n.Content[i+1]})
			}
		}
		sort.SliceStable(cands, func(a, b int) bool { return len(cands[a].key.Value) > len(cands[b].key.Value) })
		for _, c := range cands {
			rest := strings.TrimPrefix(path[len(c.key.Value):], ".")
			if rest == "" {
				return c.key.Line
			}
			if l := lineAt(c.value, rest, depth+1); l > 0 {
				return l
			}
		}
		return 0
	default:
		return 0
	}
}

// keyFits reports whether key is the whole of path or its first element.
func keyFits(path, key string) bool {
	if !strings.HasPrefix(path, key) {
		return false
	}
	rest := path[len(key):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}
