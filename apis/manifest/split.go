package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// document is one YAML or JSON document of a source.
type document struct {
	index int    // 1-based position in the source
	line  int    // 1-based line of the source where data starts
	data  []byte // the document's bytes, a window into the source
	json  bool   // data is one JSON value
	// trailing is set when non-comment content follows a "..." end marker
	// inside the document; it holds that content's line.
	trailing int
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// splitDocuments cuts a source into documents. A source whose first
// character opens a JSON object and that parses as a stream of JSON values
// is split into those values; anything else is read as a YAML stream.
func splitDocuments(data []byte) []document {
	data = bytes.TrimPrefix(data, utf8BOM)
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		if docs, ok := splitJSON(data); ok {
			return docs
		}
	}
	return splitYAML(data)
}

// splitJSON reads a stream of JSON values. It reports false when the
// source is not such a stream, so that the caller reads it as YAML (flow
// style YAML such as "{a: 1}" also starts with a brace).
func splitJSON(data []byte) ([]document, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []document
	for {
		start := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, true
			}
			return nil, false
		}
		// Skip the whitespace between the previous value and this one so
		// that the line points at the value itself.
		for start < len(data) && isJSONSpace(data[start]) {
			start++
		}
		docs = append(docs, document{
			index: len(docs) + 1,
			line:  1 + bytes.Count(data[:start], []byte("\n")),
			data:  raw,
			json:  true,
		})
	}
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// splitYAML cuts a YAML stream at document markers: a line that starts
// with "---" followed by nothing, a space or a tab. Whatever follows the
// marker on its line belongs to the new document, as in YAML. Text before
// the first marker is a document of its own unless it is only blank lines
// and comments. A "..." line ends a document; anything but blank lines and
// comments after it, before the next marker, is recorded as trailing
// content so that it is reported rather than silently dropped.
func splitYAML(data []byte) []document {
	var docs []document
	start, startLine := 0, 1
	ended, trailing := false, 0
	sawMarker := false
	flush := func(end int) {
		seg := data[start:end]
		if !sawMarker && len(docs) == 0 && isBlankYAML(seg) {
			// Preamble before the first marker: not a document.
			return
		}
		docs = append(docs, document{index: len(docs) + 1, line: startLine, data: seg, trailing: trailing})
	}

	line := 1
	for off := 0; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		text := bytes.TrimRight(data[off:next], "\r\n")
		switch {
		case isMarker(text, "---"):
			flush(off)
			sawMarker = true
			start, startLine = off+3, line
			ended, trailing = false, 0
		case isMarker(text, "..."):
			ended = true
		case ended && trailing == 0 && !isBlankYAML(text):
			trailing = line
		}
		off = next
	}
	flush(len(data))
	return docs
}

// isMarker reports whether a line is the given document marker, alone or
// followed by white space.
func isMarker(line []byte, marker string) bool {
	if !bytes.HasPrefix(line, []byte(marker)) {
		return false
	}
	rest := line[len(marker):]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t'
}

// isBlankYAML reports whether text holds only white space and comments.
func isBlankYAML(text []byte) bool {
	for len(text) > 0 {
		end := bytes.IndexByte(text, '\n')
		var line []byte
		if end < 0 {
			line, text = text, nil
		} else {
			line, text = text[:end], text[end+1:]
		}
		line = bytes.TrimLeft(line, " \t\r")
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
