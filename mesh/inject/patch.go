package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Apply applies the patch to a JSON document and returns the result. It
// supports the operations add, remove, replace and test of RFC 6902, which
// cover everything [Render] emits; the document is left untouched on error.
func (p Patch) Apply(doc []byte) ([]byte, error) {
	root, err := decodeJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("inject: patch: document: %w", err)
	}
	root, err = p.applyTo(root)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("inject: patch: %w", err)
	}
	return out, nil
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// applyTo applies the operations to a decoded document (maps, slices,
// json.Number, strings, bools, nil) and returns the new root.
func (p Patch) applyTo(root any) (any, error) {
	for i, op := range p {
		// Values are round-tripped through JSON so typed Kubernetes
		// objects become plain maps, exactly as a server would see them.
		var val any
		if op.Op == "add" || op.Op == "replace" || op.Op == "test" {
			b, err := json.Marshal(op.Value)
			if err != nil {
				return nil, fmt.Errorf("inject: patch: operation %d: value: %w", i, err)
			}
			if val, err = decodeJSON(b); err != nil {
				return nil, fmt.Errorf("inject: patch: operation %d: value: %w", i, err)
			}
		}
		tokens, err := parsePointer(op.Path)
		if err != nil {
			return nil, fmt.Errorf("inject: patch: operation %d (%s %s): %w", i, op.Op, op.Path, err)
		}
		root, err = applyOne(root, op.Op, tokens, val)
		if err != nil {
			return nil, fmt.Errorf("inject: patch: operation %d (%s %s): %w", i, op.Op, op.Path, err)
		}
	}
	return root, nil
}

// parsePointer splits an RFC 6901 JSON Pointer into unescaped tokens.
func parsePointer(ptr string) ([]string, error) {
	if ptr == "" {
		return nil, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", ptr)
	}
	parts := strings.Split(ptr[1:], "/")
	for i, s := range parts {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, fmt.Errorf("pointer %q has a bad ~ escape", ptr)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func applyOne(root any, op string, tokens []string, val any) (any, error) {
	if len(tokens) == 0 {
		switch op {
		case "add", "replace":
			return val, nil
		case "test":
			if !jsonEqual(root, val) {
				return nil, fmt.Errorf("test failed")
			}
			return root, nil
		}
		return nil, fmt.Errorf("cannot %s the whole document", op)
	}
	parent, err := walk(root, tokens[:len(tokens)-1])
	if err != nil {
		return nil, err
	}
	last := tokens[len(tokens)-1]
	switch c := parent.(type) {
	case map[string]any:
		cur, exists := c[last]
		switch op {
		case "add":
			c[last] = val
		case "replace":
			if !exists {
				return nil, fmt.Errorf("member %q does not exist", last)
			}
			c[last] = val
		case "remove":
			if !exists {
				return nil, fmt.Errorf("member %q does not exist", last)
			}
			delete(c, last)
		case "test":
			if !exists || !jsonEqual(cur, val) {
				return nil, fmt.Errorf("test failed")
			}
		default:
			return nil, fmt.Errorf("unsupported operation %q", op)
		}
		return root, nil
	case []any:
		var idx int
		if last == "-" {
			if op != "add" {
				return nil, fmt.Errorf("index - is only valid for add")
			}
			idx = len(c)
		} else if idx, err = arrayIndex(last, len(c), op == "add"); err != nil {
			return nil, err
		}
		var next []any
		switch op {
		case "add":
			next = append(c[:idx:idx], append([]any{val}, c[idx:]...)...)
		case "replace":
			c[idx] = val
			next = c
		case "remove":
			next = append(c[:idx:idx], c[idx+1:]...)
		case "test":
			if !jsonEqual(c[idx], val) {
				return nil, fmt.Errorf("test failed")
			}
			return root, nil
		default:
			return nil, fmt.Errorf("unsupported operation %q", op)
		}
		return setIn(root, tokens[:len(tokens)-1], next)
	default:
		return nil, fmt.Errorf("parent of %q is not an object or array", last)
	}
}

func arrayIndex(tok string, n int, forAdd bool) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("bad array index %q", tok)
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 {
		return 0, fmt.Errorf("bad array index %q", tok)
	}
	if i > n || (!forAdd && i == n) {
		return 0, fmt.Errorf("array index %d out of range (length %d)", i, n)
	}
	return i, nil
}

// walk follows tokens from root and returns the value they point at.
func walk(root any, tokens []string) (any, error) {
	cur := root
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("member %q does not exist", t)
			}
			cur = next
		case []any:
			i, err := arrayIndex(t, len(c), false)
			if err != nil {
				return nil, err
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("cannot descend into %q: not an object or array", t)
		}
	}
	return cur, nil
}

// setIn replaces the value at tokens (which must exist) and returns root;
// slices change identity when they grow, so their holder is updated.
func setIn(root any, tokens []string, v any) (any, error) {
	if len(tokens) == 0 {
		return v, nil
	}
	parent, err := walk(root, tokens[:len(tokens)-1])
	if err != nil {
		return nil, err
	}
	last := tokens[len(tokens)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		i, err := arrayIndex(last, len(c), false)
		if err != nil {
			return nil, err
		}
		c[i] = v
	}
	return root, nil
}

// jsonEqual compares decoded JSON values as RFC 6902's test operation does:
// numbers by value, objects regardless of member order.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, okx := new(big.Float).SetString(string(x))
		fy, oky := new(big.Float).SetString(string(y))
		return okx && oky && fx.Cmp(fy) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
