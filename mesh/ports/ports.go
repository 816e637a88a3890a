package ports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/weftmesh/weft/apis/vocab"
)

// Range is an inclusive range of TCP ports.
type Range struct {
	From, To uint16
}

// Set is a set of TCP ports kept as sorted, merged ranges. The zero value
// is empty; a Set is immutable.
type Set struct {
	ranges []Range
}

// Contains reports whether port p is in the set.
func (s Set) Contains(p uint32) bool {
	if p == 0 || p > 65535 {
		return false
	}
	i := sort.Search(len(s.ranges), func(i int) bool { return uint32(s.ranges[i].To) >= p })
	return i < len(s.ranges) && uint32(s.ranges[i].From) <= p
}

// Empty reports whether the set holds no port.
func (s Set) Empty() bool { return len(s.ranges) == 0 }

// Ranges returns a copy of the set's ranges, sorted and merged.
func (s Set) Ranges() []Range { return append([]Range(nil), s.ranges...) }

// String formats the set in the annotation syntax ("25,4000-4100").
func (s Set) String() string {
	parts := make([]string, 0, len(s.ranges))
	for _, r := range s.ranges {
		if r.From == r.To {
			parts = append(parts, strconv.Itoa(int(r.From)))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.From, r.To))
		}
	}
	return strings.Join(parts, ",")
}

// Only returns the ports of list that are in s.
func (s Set) Only(list []uint16) Set {
	var rs []Range
	for _, p := range list {
		if s.Contains(uint32(p)) {
			rs = append(rs, Range{From: p, To: p})
		}
	}
	return newSet(rs)
}

// Of returns the set of the given ports; 0 is ignored.
func Of(ps ...uint16) Set {
	rs := make([]Range, 0, len(ps))
	for _, p := range ps {
		if p != 0 {
			rs = append(rs, Range{From: p, To: p})
		}
	}
	return newSet(rs)
}

// Parse reads a port list: comma-separated port numbers ("3306"),
// inclusive ranges ("4000-4100") and, when named is not nil, names of
// container ports ("mysql"). Blank entries are ignored. A bad entry is an
// error naming it.
func Parse(s string, named map[string]int32) (Set, error) {
	var out []Range
	for _, raw := range strings.Split(s, ",") {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		if lo, hi, ok := strings.Cut(e, "-"); ok && isDigits(lo) {
			from, err := parseNumber(lo)
			if err != nil {
				return Set{}, fmt.Errorf("ports: range %q: %w", e, err)
			}
			to, err := parseNumber(hi)
			if err != nil {
				return Set{}, fmt.Errorf("ports: range %q: %w", e, err)
			}
			if from > to {
				return Set{}, fmt.Errorf("ports: range %q: start %d is after end %d", e, from, to)
			}
			out = append(out, Range{From: from, To: to})
			continue
		}
		if isDigits(e) {
			p, err := parseNumber(e)
			if err != nil {
				return Set{}, fmt.Errorf("ports: port %q: %w", e, err)
			}
			out = append(out, Range{From: p, To: p})
			continue
		}
		if p, ok := named[e]; ok && p > 0 && p <= 65535 {
			out = append(out, Range{From: uint16(p), To: uint16(p)})
			continue
		}
		return Set{}, fmt.Errorf("ports: entry %q is not a port number, a range or a known port name", e)
	}
	return newSet(out), nil
}

// DefaultOpaque returns Linkerd's default opaque ports (25, 587, 3306,
// 4444, 5432, 6379, 9300, 11211): protocols where the server speaks first
// or that are not HTTP.
func DefaultOpaque() Set {
	s, err := Parse(vocab.DefaultOpaquePorts, nil)
	if err != nil {
		panic("ports: vocab.DefaultOpaquePorts does not parse: " + err.Error())
	}
	return s
}

func newSet(rs []Range) Set {
	if len(rs) == 0 {
		return Set{}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	merged := []Range{rs[0]}
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if uint32(r.From) <= uint32(last.To)+1 {
			if r.To > last.To {
				last.To = r.To
			}
			continue
		}
		merged = append(merged, r)
	}
	return Set{ranges: merged}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseNumber(s string) (uint16, error) {
	if !isDigits(s) || len(s) > 5 {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is out of the range 1-65535", s)
	}
	return uint16(n), nil
}
