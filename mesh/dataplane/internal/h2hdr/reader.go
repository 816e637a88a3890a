package h2hdr

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// defaultMaxList is the header list cap when none is set, as the
// Framer's.
const defaultMaxList = 16 << 20

// maxKeptFields bounds the field slice a Reader keeps between blocks.
const maxKeptFields = 256

var (
	errPseudoAfterRegular = errors.New("h2hdr: pseudo-header field after a regular field")
	errMixPseudo          = errors.New("h2hdr: request and response pseudo-header fields in one block")
)

// Block is one decoded header block: the HEADERS frame (its stream, flags
// and priority) and the fields of the whole block in order, pseudo-header
// fields first.
type Block struct {
	*http2.HeadersFrame

	// Fields are the block's fields, every name and value valid. Owned by
	// the Reader: valid until its next ReadFrame.
	Fields []hpack.HeaderField

	// Truncated is set when the list went over the cap: Fields holds
	// what came before; the HPACK state is still good.
	Truncated bool
}

// PseudoValue returns the value of the pseudo-header field name (without
// its colon), or "".
func (b *Block) PseudoValue(name string) string {
	for _, f := range b.Fields {
		if !f.IsPseudo() {
			break
		}
		if f.Name[1:] == name {
			return f.Value
		}
	}
	return ""
}

// PseudoFields returns the block's pseudo-header fields.
func (b *Block) PseudoFields() []hpack.HeaderField {
	for i, f := range b.Fields {
		if !f.IsPseudo() {
			return b.Fields[:i]
		}
	}
	return b.Fields
}

// RegularFields returns the block's regular fields.
func (b *Block) RegularFields() []hpack.HeaderField {
	for i, f := range b.Fields {
		if !f.IsPseudo() {
			return b.Fields[i:]
		}
	}
	return nil
}

// Reader reads frames from a Framer whose ReadMetaHeaders is nil, and
// decodes header blocks itself.
type Reader struct {
	fr    *http2.Framer
	dec   *hpack.Decoder
	limit uint32

	// Block is the last header block read (ReadFrame returned its
	// HEADERS frame).
	Block Block

	// OnContinuation, when set, is called with each CONTINUATION frame
	// of a block before its fragment is decoded; an error it returns
	// ends ReadFrame with that error (the caller's flood limits).
	OnContinuation func(*http2.ContinuationFrame) error

	// The block being decoded.
	headersLeft, trailersLeft uint32
	sawRegular                bool
	invalid                   error
}

// NewReader reads frames from fr with an HPACK decoder whose dynamic
// table is tableSize bytes, capping each header list at maxList bytes
// (as SETTINGS_MAX_HEADER_LIST_SIZE counts them; 0 is 16 MiB).
func NewReader(fr *http2.Framer, tableSize, maxList uint32) *Reader {
	if maxList == 0 {
		maxList = defaultMaxList
	}
	r := &Reader{fr: fr, limit: maxList}
	r.dec = hpack.NewDecoder(tableSize, r.emit)
	if int(maxList) > 0 {
		r.dec.SetMaxStringLength(int(maxList))
	}
	return r
}

// ReadFrame reads the next frame. For a HEADERS frame it reads the
// CONTINUATION frames that complete the block too, decodes the block into
// r.Block and returns the HEADERS frame. A malformed block is a
// StreamError (bad fields: the connection goes on) or a ConnectionError
// (HPACK failed, or a block far over the cap); with a ConnectionError
// about the block the HEADERS frame is returned too.
func (r *Reader) ReadFrame() (http2.Frame, error) {
	f, err := r.fr.ReadFrame()
	if err != nil {
		return f, err
	}
	hf, ok := f.(*http2.HeadersFrame)
	if !ok {
		return f, nil
	}
	return r.decode(hf)
}

func (r *Reader) decode(hf *http2.HeadersFrame) (http2.Frame, error) {
	b := &r.Block
	clear(b.Fields) // no strings of the last block kept alive
	if cap(b.Fields) > maxKeptFields {
		b.Fields = nil
	}
	b.HeadersFrame, b.Fields, b.Truncated = hf, b.Fields[:0], false
	r.headersLeft, r.trailersLeft = r.limit, r.limit
	r.sawRegular, r.invalid = false, nil
	r.dec.SetEmitEnabled(true)

	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		// A fragment more than twice what the list may still hold (any
		// fragment once the cap was hit), or one after an invalid field,
		// ends the connection rather than being decoded for nothing.
		if int64(len(frag)) > 2*(int64(r.headersLeft)+int64(r.trailersLeft)) || r.invalid != nil {
			return hf, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := r.dec.Write(frag); err != nil {
			return hf, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		// The Framer lets nothing but this stream's CONTINUATION follow.
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf, ok := f.(*http2.ContinuationFrame)
		if !ok {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if r.OnContinuation != nil {
			if err := r.OnContinuation(cf); err != nil {
				return nil, err
			}
		}
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := r.dec.Close(); err != nil {
		return hf, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid == nil {
		r.invalid = checkPseudos(b.PseudoFields())
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	return hf, nil
}

// emit takes one decoded field.
func (r *Reader) emit(f hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		// The value is left out of the error: it may be a secret.
		r.invalid = fmt.Errorf("h2hdr: invalid value of header field %q", f.Name)
	}
	if strings.HasPrefix(f.Name, ":") {
		if r.sawRegular {
			r.invalid = errPseudoAfterRegular
		}
	} else {
		r.sawRegular = true
		if !validWireName(f.Name) {
			r.invalid = fmt.Errorf("h2hdr: invalid header field name %q", f.Name)
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
		return
	}
	left, size := &r.headersLeft, f.Size()
	if f.Name == "trailer" {
		// A trailer field is counted as the fields it declares would be.
		n := uint32(strings.Count(f.Value, ",") + 1)
		left, size = &r.trailersLeft, uint32(len(f.Value))-n+1+n*hpack.HeaderField{}.Size()
	}
	if size > *left {
		r.dec.SetEmitEnabled(false)
		r.Block.Truncated = true
		r.headersLeft, r.trailersLeft = 0, 0
		return
	}
	*left -= size
	r.Block.Fields = append(r.Block.Fields, f)
}

// validWireName reports whether a field name may be sent in HTTP/2: a
// token, in lower case.
func validWireName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !httpguts.IsTokenRune(rune(c)) || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// checkPseudos refuses unknown and repeated pseudo-header fields, and a
// block with both request and response ones.
func checkPseudos(pf []hpack.HeaderField) error {
	var request, response bool
	for i, f := range pf {
		switch f.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return fmt.Errorf("h2hdr: unknown pseudo-header field %q", f.Name)
		}
		for _, g := range pf[:i] {
			if f.Name == g.Name {
				return fmt.Errorf("h2hdr: repeated pseudo-header field %q", f.Name)
			}
		}
	}
	if request && response {
		return errMixPseudo
	}
	return nil
}
