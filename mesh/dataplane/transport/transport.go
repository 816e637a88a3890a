// Package transport defines the connection preamble that one Weft proxy sends
// to another after their mutual TLS handshake.
//
// When an outbound proxy dials a meshed endpoint it opens a TLS 1.3 session
// whose SNI is the server workload's identity and offers the ALPN protocol
// [ALPN]. If the server accepts that protocol, the first bytes the client
// writes inside the session are a [Header], encoded as below, followed by the
// application's bytes. The header tells the inbound proxy which application
// port the connection is meant for, so a connection can reach the inbound
// proxy's own port (no iptables needed) and still be forwarded to the right
// application port, and which session protocol the client detected.
//
// Version 1 wire format (all integers big-endian):
//
//	offset  size  field
//	0       4     magic "WEFT"
//	4       1     version, 1
//	5       1     session protocol (0 opaque, 1 HTTP/1, 2 HTTP/2)
//	6       2     target port, 1..65535
//	8       1     name length N, 0..253
//	9       N     name: optional target authority (host[:port]), ASCII
//
// A reader that sees another magic or version refuses the connection. The
// format is versioned by both the ALPN protocol name and the version byte; a
// later version gets a new ALPN name so that both ends agree on it during the
// handshake, before any byte of the header is sent.
package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ALPN is the TLS application protocol that announces version 1 of the
// header. A proxy that accepts it expects a Header as the first bytes of the
// session.
const ALPN = "weft.transport/1"

// Magic opens every header.
const Magic = "WEFT"

// Version is the header version this package writes.
const Version = 1

// MaxNameLen bounds the optional name (the longest DNS name).
const MaxNameLen = 253

// fixedLen is the size of the header before the name.
const fixedLen = 9

// MaxLen is the largest encoded header.
const MaxLen = fixedLen + MaxNameLen

// Protocol is the session protocol the client detected.
type Protocol uint8

// Session protocols.
const (
	Opaque Protocol = 0
	HTTP1  Protocol = 1
	HTTP2  Protocol = 2
)

// String names the protocol.
func (p Protocol) String() string {
	switch p {
	case Opaque:
		return "opaque"
	case HTTP1:
		return "http/1"
	case HTTP2:
		return "h2"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// Header is the preamble of a proxy-to-proxy session.
type Header struct {
	// Port is the application port on the server workload.
	Port uint16
	// Protocol is the session protocol detected by the client proxy.
	Protocol Protocol
	// Name optionally carries the authority the client asked for.
	Name string
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("transport: malformed header")

// Validate reports whether h can be encoded.
func (h Header) Validate() error {
	if h.Port == 0 {
		return fmt.Errorf("%w: port 0", ErrMalformed)
	}
	if h.Protocol > HTTP2 {
		return fmt.Errorf("%w: unknown protocol %d", ErrMalformed, h.Protocol)
	}
	if len(h.Name) > MaxNameLen {
		return fmt.Errorf("%w: name is %d bytes, at most %d", ErrMalformed, len(h.Name), MaxNameLen)
	}
	for i := 0; i < len(h.Name); i++ {
		if c := h.Name[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: name has byte 0x%02x at %d", ErrMalformed, c, i)
		}
	}
	return nil
}

// Append encodes h at the end of b.
func (h Header) Append(b []byte) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return b, err
	}
	b = append(b, Magic...)
	b = append(b, Version, byte(h.Protocol))
	b = binary.BigEndian.AppendUint16(b, h.Port)
	b = append(b, byte(len(h.Name)))
	return append(b, h.Name...), nil
}

// Parse decodes a header at the start of b. It returns the header and the
// number of bytes it used. io.ErrUnexpectedEOF means b holds only a prefix of
// a header.
func Parse(b []byte) (Header, int, error) {
	if len(b) < fixedLen {
		if err := checkPrefix(b); err != nil {
			return Header{}, 0, err
		}
		return Header{}, 0, io.ErrUnexpectedEOF
	}
	if err := checkPrefix(b[:6]); err != nil {
		return Header{}, 0, err
	}
	h := Header{Protocol: Protocol(b[5]), Port: binary.BigEndian.Uint16(b[6:8])}
	n := int(b[8])
	if n > MaxNameLen {
		return Header{}, 0, fmt.Errorf("%w: name length %d above %d", ErrMalformed, n, MaxNameLen)
	}
	if len(b) < fixedLen+n {
		return Header{}, 0, io.ErrUnexpectedEOF
	}
	h.Name = string(b[fixedLen : fixedLen+n])
	if err := h.Validate(); err != nil {
		return Header{}, 0, err
	}
	return h, fixedLen + n, nil
}

// checkPrefix validates the magic, version and protocol bytes present in b.
func checkPrefix(b []byte) error {
	for i := 0; i < len(b) && i < len(Magic); i++ {
		if b[i] != Magic[i] {
			return fmt.Errorf("%w: bad magic", ErrMalformed)
		}
	}
	if len(b) > 4 && b[4] != Version {
		return fmt.Errorf("%w: unsupported version %d", ErrMalformed, b[4])
	}
	if len(b) > 5 && Protocol(b[5]) > HTTP2 {
		return fmt.Errorf("%w: unknown protocol %d", ErrMalformed, b[5])
	}
	return nil
}

// Read reads exactly one header from r, never more bytes than the header
// holds, so the application's bytes stay in r.
func Read(r io.Reader) (Header, error) {
	var buf [MaxLen]byte
	if _, err := io.ReadFull(r, buf[:fixedLen]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if err2 := checkPrefix(buf[:0]); err2 != nil {
				return Header{}, err2
			}
			return Header{}, fmt.Errorf("%w: %w", ErrMalformed, io.ErrUnexpectedEOF)
		}
		return Header{}, fmt.Errorf("transport: reading header: %w", err)
	}
	if err := checkPrefix(buf[:6]); err != nil {
		return Header{}, err
	}
	n := int(buf[8])
	if n > MaxNameLen {
		return Header{}, fmt.Errorf("%w: name length %d above %d", ErrMalformed, n, MaxNameLen)
	}
	if _, err := io.ReadFull(r, buf[fixedLen:fixedLen+n]); err != nil {
		return Header{}, fmt.Errorf("%w: name: %w", ErrMalformed, err)
	}
	h, _, err := Parse(buf[:fixedLen+n])
	return h, err
}
