package dataplane

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
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

// pipe copies in both directions on two new goroutines and returns at
// once; the goroutine that finishes last closes both connections and calls
// done. Handing the copies to fresh goroutines lets the accepting
// goroutine, whose stack grew during detection and the TLS handshake, exit.
// src are the series of the client connection (bytes from client count as
// read, bytes to it as written), dst those of the server connection (nil
// when it is not counted); errors are recorded on the side they came from.
func pipe(client, server net.Conn, src, dst *connStats, done func()) {
	var left atomic.Int32
	left.Store(2)
	finish := func() {
		if left.Add(-1) == 0 {
			client.Close()
			server.Close()
			done()
		}
	}
	var toClient, toServer byteCounter = src.wrt, src.read
	if dst != nil {
		toClient, toServer = both{src.wrt, dst.read}, both{src.read, dst.wrt}
	}
	failed := func(from, to *connStats) func(error) {
		return func(err error) {
			if err == nil || isClosedErr(err) {
				return
			}
			var we writeError
			if errors.As(err, &we) {
				from = to
			}
			if from != nil {
				from.fail(err)
			}
		}
	}
	go func() {
		defer finish()
		copyHalf(client, server, toClient, failed(dst, src))
	}()
	go func() {
		defer finish()
		copyHalf(server, client, toServer, failed(src, dst))
	}()
}

// writeError marks an error of the destination side of a copy.
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

// copyHalf copies src to dst, then shuts dst's write side (or closes it when
// that is not possible or the copy failed, which also ends the other half).
// failed is told the error that ended the copy, if any.
func copyHalf(dst, src net.Conn, count byteCounter, failed func(error)) {
	err := copyConn(dst, src, count)
	if err == nil {
		if hc, ok := dst.(halfCloser); ok && hc.CloseWrite() == nil {
			return
		}
	} else {
		failed(err)
	}
	dst.Close()
	src.Close()
}

// copyConn moves bytes from src to dst without holding a buffer while src
// is idle:
//   - a plaintext TCP source is polled for readability with a zero-copy peek
//     and a pooled buffer is taken only when bytes are waiting;
//   - a TLS source parks in a one-byte read (the record stays in the TLS
//     layer) and takes a pooled buffer for the rest of the burst, giving it
//     back after busyLinger without data;
//   - any other source is copied with a pooled buffer.
//
// It returns nil at EOF.
func copyConn(dst, src net.Conn, count byteCounter) error {
	switch s := src.(type) {
	case *net.TCPConn:
		rc, err := s.SyscallConn()
		if err != nil {
			return err
		}
		return copyFromTCP(dst, s, rc, count)
	case *tls.Conn:
		return copyFromTLS(dst, s, count)
	}
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

func copyFromTCP(dst net.Conn, src *net.TCPConn, rc syscall.RawConn, count byteCounter) error {
	for {
		if err := rc.Read(readable); err != nil {
			return err
		}
		buf := getBuf()
		for {
			n, err := src.Read(*buf)
			if n > 0 {
				if _, werr := dst.Write((*buf)[:n]); werr != nil {
					putBuf(buf)
					return writeError{werr}
				}
				count.Add(float64(n))
			}
			if err != nil {
				putBuf(buf)
				return eofIsNil(err)
			}
			if n < len(*buf) {
				break // drained: park without the buffer
			}
		}
		putBuf(buf)
	}
}

func copyFromTLS(dst net.Conn, src *tls.Conn, count byteCounter) error {
	var first [1]byte
	for {
		// Parked: no buffer held; the TLS layer keeps the record.
		n, err := src.Read(first[:])
		if err != nil {
			return eofIsNil(err)
		}
		if n == 0 {
			continue
		}
		buf := getBuf()
		(*buf)[0] = first[0]
		// Take what the TLS layer already holds without touching the socket.
		_ = src.SetReadDeadline(aLongTimeAgo)
		m, err := src.Read((*buf)[1:])
		if _, werr := dst.Write((*buf)[:1+m]); werr != nil {
			putBuf(buf)
			return writeError{werr}
		}
		count.Add(float64(1 + m))
		if err != nil && !isTimeout(err) {
			putBuf(buf)
			return eofIsNil(err)
		}
		// Busy: blocking reads with the buffer until the stream pauses.
		_ = src.SetReadDeadline(time.Now().Add(busyLinger))
		for {
			n, err := src.Read(*buf)
			if n > 0 {
				if _, werr := dst.Write((*buf)[:n]); werr != nil {
					putBuf(buf)
					return writeError{werr}
				}
				count.Add(float64(n))
			}
			if err != nil {
				if isTimeout(err) {
					break
				}
				putBuf(buf)
				return eofIsNil(err)
			}
		}
		putBuf(buf)
		_ = src.SetReadDeadline(time.Time{})
	}
}

var aLongTimeAgo = time.Unix(1, 0)

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
