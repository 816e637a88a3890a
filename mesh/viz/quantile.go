package viz

import (
	"math"
	"sort"
	"strconv"
)

// Bucket is one cumulative histogram bucket: Count observations were at
// most UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram is a set of cumulative buckets, as Prometheus exposes them.
type Histogram []Bucket

// Add merges the series of a NAME_bucket family into h, summing buckets of
// the same bound (aggregating several pods or label sets). Series without
// a parseable "le" label are skipped.
func (h Histogram) Add(s Series) Histogram {
	le, err := strconv.ParseFloat(s.Labels["le"], 64)
	if err != nil {
		return h
	}
	for i := range h {
		if h[i].UpperBound == le {
			h[i].Count += s.Value
			return h
		}
	}
	return append(h, Bucket{UpperBound: le, Count: s.Value})
}

// Total is the number of observations (the +Inf bucket, or the largest
// count when +Inf is missing).
func (h Histogram) Total() float64 {
	var t float64
	for _, b := range h {
		t = math.Max(t, b.Count)
	}
	return t
}

// Quantile estimates the q-quantile (0 <= q <= 1) of the observations
// with the same rules as Prometheus' histogram_quantile: the bucket that
// holds the rank is found, and the value interpolated linearly inside it
// (from 0 for the first bucket). A rank in the +Inf bucket returns the
// largest finite bound. It returns NaN when there are no observations or
// no finite bucket, and for q outside [0, 1].
func (h Histogram) Quantile(q float64) float64 {
	if q < 0 || q > 1 || math.IsNaN(q) || len(h) == 0 {
		return math.NaN()
	}
	b := append(Histogram(nil), h...)
	sort.Slice(b, func(i, j int) bool { return b[i].UpperBound < b[j].UpperBound })
	if !math.IsInf(b[len(b)-1].UpperBound, 1) {
		// Without +Inf the largest bucket is taken as the total.
		b = append(b, Bucket{UpperBound: math.Inf(1), Count: b[len(b)-1].Count})
	}
	if len(b) < 2 {
		return math.NaN()
	}
	// Cumulative counts must not decrease; a scrape taken mid-update or
	// a window across a reset can break that, so repair it as Prometheus
	// does.
	for i := 1; i < len(b); i++ {
		if b[i].Count < b[i-1].Count {
			b[i].Count = b[i-1].Count
		}
	}
	total := b[len(b)-1].Count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(b)-1, func(i int) bool { return b[i].Count >= rank })
	if i == len(b)-1 {
		return b[len(b)-2].UpperBound
	}
	if i == 0 && b[0].UpperBound <= 0 {
		return b[0].UpperBound
	}
	var lower, before float64
	if i > 0 {
		lower, before = b[i-1].UpperBound, b[i-1].Count
	}
	upper := b[i].UpperBound
	in := b[i].Count - before
	if in <= 0 {
		return upper
	}
	return lower + (upper-lower)*((rank-before)/in)
}
