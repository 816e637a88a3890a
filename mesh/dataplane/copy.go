package dataplane

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// bufSize is the size of the pooled copy buffers: two TLS records.
const bufSize = 32 << 10

// busyLinger is how long a TLS copy loop keeps its buffer after the last
// byte before it parks without one.
const busyLinger = time.Second

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

// smallBufSize is the size of the buffers that copy bodies known to be
// small: most responses are, and a pool emptied by a collection refills
// at 4 KiB a buffer instead of 32.
const smallBufSize = 4 << 10

var smallBufPool = sync.Pool{New: func() any { b := make([]byte, smallBufSize); return &b }}

// getBodyBuf returns a pooled buffer for copying a body of length n (-1
// when unknown) and the function that gives it back.
func getBodyBuf(n int64) (*[]byte, func(*[]byte)) {
	if n >= 0 && n <= smallBufSize {
		return smallBufPool.Get().(*[]byte), putSmallBuf
	}
	return getBuf(), putBuf
}

func putSmallBuf(b *[]byte) { smallBufPool.Put(b) }

// halfCloser is a connection whose write side can be shut alone.
type halfCloser interface{ CloseWrite() error }

// writeError marks an error of the destination side of a copy.
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

// copyConn copies src to dst with a pooled buffer held for the whole copy:
// the path of sources that are neither TCP nor TLS over TCP (see flow for
// those). It returns nil at EOF.
func copyConn(dst, src net.Conn, count byteCounter) error {
	buf := getBuf()
	defer putBuf(buf)
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

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
