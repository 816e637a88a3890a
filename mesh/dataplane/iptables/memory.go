package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Memory is an in-memory nat table that understands the commands Apply and
// Cleanup issue (-S, -N, -F, -X, -A, -C, -D). It refuses to delete a chain
// that is still referenced or not empty, as iptables does.
type Memory struct {
	mu     sync.Mutex
	chains map[string][]string // chain -> rule specs joined by spaces
	// Calls counts the commands run.
	Calls int
}

var builtin = []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}

// NewMemory returns an empty nat table with the built-in chains.
func NewMemory() *Memory {
	m := &Memory{chains: map[string][]string{}}
	for _, c := range builtin {
		m.chains[c] = nil
	}
	return m
}

// Run executes one command.
func (m *Memory) Run(_ context.Context, args ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Calls++
	if len(args) < 4 || args[0] != "-t" || args[1] != Table {
		return fmt.Errorf("memory iptables: unsupported command %q", args)
	}
	op, chain, spec := args[2], args[3], strings.Join(args[4:], " ")
	rules, exists := m.chains[chain]
	if !exists && op != "-N" {
		return fmt.Errorf("memory iptables: no chain %s", chain)
	}
	switch op {
	case "-S":
		return nil
	case "-N":
		if exists {
			return fmt.Errorf("memory iptables: chain %s exists", chain)
		}
		m.chains[chain] = nil
	case "-F":
		m.chains[chain] = nil
	case "-X":
		if slices.Contains(builtin, chain) || len(rules) > 0 {
			return fmt.Errorf("memory iptables: chain %s is built in or not empty", chain)
		}
		for c, rs := range m.chains {
			for _, r := range rs {
				if strings.HasSuffix(r, "-j "+chain) {
					return fmt.Errorf("memory iptables: chain %s is referenced from %s", chain, c)
				}
			}
		}
		delete(m.chains, chain)
	case "-A":
		if target := args[len(args)-1]; args[len(args)-2] == "-j" && strings.HasPrefix(target, "WEFT_") {
			if _, ok := m.chains[target]; !ok {
				return fmt.Errorf("memory iptables: no chain %s", target)
			}
		}
		m.chains[chain] = append(rules, spec)
	case "-C":
		if !slices.Contains(rules, spec) {
			return fmt.Errorf("memory iptables: no such rule in %s", chain)
		}
	case "-D":
		i := slices.Index(rules, spec)
		if i < 0 {
			return fmt.Errorf("memory iptables: no such rule in %s", chain)
		}
		m.chains[chain] = slices.Delete(rules, i, i+1)
	default:
		return fmt.Errorf("memory iptables: unsupported operation %s", op)
	}
	return nil
}

// Save renders the table like iptables-save (chains sorted, no counters).
func (m *Memory) Save() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.chains))
	for c := range m.chains {
		names = append(names, c)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, c := range names {
		fmt.Fprintf(&b, ":%s\n", c)
	}
	for _, c := range names {
		for _, r := range m.chains[c] {
			fmt.Fprintf(&b, "-A %s %s\n", c, r)
		}
	}
	return b.String()
}
