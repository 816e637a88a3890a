// Package h2hdr reads HTTP/2 frames for the proxy's HTTP/2 server and
// client, decoding each header block (a HEADERS frame and the
// CONTINUATION frames that complete it) with HPACK into a Block that the
// Reader reuses from one block to the next.
//
// It does what golang.org/x/net/http2's Framer does when its
// ReadMetaHeaders is set, with the same checks and the same errors by
// kind (field values and names, pseudo-header order, duplicates and mix,
// the header list size cap, an oversized or continued-after-invalid
// block, HPACK failures), without that path's allocations per block: the
// Framer allocates the decoded frame, its field slice as it grows, and
// the closure and variables its decoder calls back into, for every block.
// Here the decoder, its callback and the field slice live as long as the
// connection; only the strings HPACK decodes are new.
//
// A Block and its Fields are valid until the next ReadFrame: a caller
// copies what it keeps (the strings themselves are immutable and may be
// kept).
package h2hdr
