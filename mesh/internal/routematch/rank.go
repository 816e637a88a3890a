package routematch

// Rank says how specifically a request matched a rule; of two matching
// rules the one with the greater Rank applies. The zero Rank is below
// every match. Ranks of HTTP and of gRPC matches are never compared with
// each other.
//
// A Rank is two words compared in order, so that selection copies and
// compares it cheaply. From the most significant bit:
//
//	hi: host kind (2 bits: none, wildcard, exact), host length (30),
//	    path length (32)
//	lo: path kind (2 bits: prefix, regex, exact), gRPC service length
//	    (16), gRPC method length (16), method condition (1), header
//	    conditions (15), query conditions (14)
//
// A length or count too large for its field saturates; no real route
// comes near (a DNS name has at most 253 bytes), and a saturated field
// only ties where it would have won.
type Rank struct {
	hi, lo uint64
}

// Field positions and widths of Rank.
const (
	hostKindShift = 62
	hostLenShift  = 32
	hostLenBits   = 30
	pathLenBits   = 32

	pathKindShift = 62
	serviceShift  = 46
	nameBits      = 16
	rpcShift      = 30
	methodShift   = 29
	headersShift  = 14
	headersBits   = 15
	queryBits     = 14
)

// Kinds as Rank orders them.
const (
	hostNone  = 0
	hostWild  = 1
	hostExact = 2

	kindPrefix = 1
	kindRegex  = 2
	kindExact  = 3
)

// sat narrows n to bits bits, saturating.
func sat(n, bits int) uint64 {
	if limit := 1<<bits - 1; n > limit {
		return uint64(limit)
	}
	return uint64(n)
}

// Less reports whether r is less specific than o: o wins over r. Equal
// ranks are not less, so the first of equals stays chosen.
func (r Rank) Less(o Rank) bool {
	return r.hi < o.hi || r.hi == o.hi && r.lo < o.lo
}

func hostRank(kind uint64, n int) Rank {
	return Rank{hi: kind<<hostKindShift | sat(n, hostLenBits)<<hostLenShift}
}

func (r Rank) withPath(kind uint64, n int) Rank {
	r.hi |= sat(n, pathLenBits)
	r.lo |= kind << pathKindShift
	return r
}

func (r Rank) withRPC(service, method int) Rank {
	r.lo |= sat(service, nameBits)<<serviceShift | sat(method, nameBits)<<rpcShift
	return r
}

func (r Rank) withConditions(method bool, headers, query int) Rank {
	if method {
		r.lo |= 1 << methodShift
	}
	r.lo |= sat(headers, headersBits)<<headersShift | sat(query, queryBits)
	return r
}

// AnyRequest returns the rank of an HTTP rule without matches on a route
// whose hosts ranked host: that of a prefix "/", as the Gateway API
// reads a rule without matches.
func AnyRequest(host Rank) Rank { return host.withPath(kindPrefix, 1) }

// AnyCall returns the rank of a gRPC rule without matches on a route
// whose hosts ranked host.
func AnyCall(host Rank) Rank { return host }
