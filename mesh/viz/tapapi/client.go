package tapapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/weftmesh/weft/mesh/viz"
)

// Reader reads a tap's answer: a viz.EventStream over the JSON lines,
// which counts the events the server dropped and passes its warnings to
// a callback.
type Reader struct {
	sc      *bufio.Scanner
	body    io.Closer
	warn    func(string)
	dropped atomic.Uint64
}

// NewReader reads body (which Close closes); warn, when not nil, is
// called with each warning.
func NewReader(body io.ReadCloser, warn func(string)) *Reader {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxMessageBytes)
	return &Reader{sc: sc, body: body, warn: warn}
}

// Recv returns the next event; io.EOF when the server ended the tap.
func (r *Reader) Recv() (viz.Event, error) {
	for r.sc.Scan() {
		line := bytes.TrimSpace(r.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return viz.Event{}, fmt.Errorf("tapapi: reading the tap: %w", err)
		}
		switch {
		case m.Event != nil:
			return *m.Event, nil
		case m.Dropped > 0:
			r.dropped.Add(m.Dropped)
		case m.Warning != "" && r.warn != nil:
			r.warn(m.Warning)
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return viz.Event{}, fmt.Errorf("tapapi: reading the tap: a message over %d bytes", MaxMessageBytes)
		}
		return viz.Event{}, fmt.Errorf("tapapi: reading the tap: %w", err)
	}
	return viz.Event{}, io.EOF
}

// Dropped is the number of events the server reported dropping so far.
func (r *Reader) Dropped() uint64 { return r.dropped.Load() }

// Close closes the body.
func (r *Reader) Close() error { return r.body.Close() }
