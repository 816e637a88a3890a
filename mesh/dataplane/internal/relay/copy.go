package relay

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// BufSize is the size of the pooled copy buffers: two TLS records.
const BufSize = 32 << 10

// busyLinger is how long a TLS copy loop keeps its buffer after the last
// byte before it parks without one.
const busyLinger = time.Second

var bufPool = sync.Pool{New: func() any { b := make([]byte, BufSize); return &b }}

// GetBuf takes a BufSize buffer from the pool the relay shares with the
// proxy's other copies (protocol detection, upgraded connections).
func GetBuf() *[]byte { return bufPool.Get().(*[]byte) }

// PutBuf gives back a buffer of GetBuf.
func PutBuf(b *[]byte) { bufPool.Put(b) }

// HalfCloser is a connection whose write side can be shut alone.
type HalfCloser interface{ CloseWrite() error }

// writeError marks an error of the destination side of a copy.
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

// copyConn copies src to dst with a pooled buffer held for the whole copy:
// the path of sources that are neither TCP nor TLS over TCP (see flow for
// those). It returns nil at EOF.
func copyConn(dst, src net.Conn, count Counter) error {
	buf := GetBuf()
	defer PutBuf(buf)
	for {
		n, err := src.Read(*buf)
		if n > 0 {
			if _, werr := dst.Write((*buf)[:n]); werr != nil {
				return writeError{werr}
			}
			count.Add(float64(n))
		}
		if err != nil {
			return eofIsNil(err)
		}
	}
}

func eofIsNil(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

var aLongTimeAgo = time.Unix(1, 0)

// IsTimeout reports a deadline's error.
func IsTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// IsClosedErr reports errors that mean the connection was closed locally
// or ended normally, which do not make its end a failure.
func IsClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || IsTimeout(err)
}
