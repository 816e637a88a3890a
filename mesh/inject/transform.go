package inject

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
)

// Format is the output format of `weft inject`.
type Format string

// Output formats.
const (
	// FormatYAML prints documents separated by "---". Documents that are
	// not changed are printed exactly as they were read.
	FormatYAML Format = "yaml"
	// FormatJSON prints each document as one JSON object on its own line.
	FormatJSON Format = "json"
)

// Transformer implements `weft inject`: it reads workloads, adds the
// linkerd.io/inject annotation (default) or the whole proxy (manual mode)
// to their pod templates, passes every other document through, and reports
// what it did for each workload.
type Transformer struct {
	values     Values
	manual     bool
	format     Format
	namespaces NamespaceLookup
	verbose    bool
	jsonReport bool
	uninject   bool
	// overrides are config annotations set on every pod template and
	// namespace (and, for opaque-ports, service) of the input.
	overrides map[string]string
}

// TransformOption tunes a [Transformer].
type TransformOption func(*Transformer)

// WithManual renders the full sidecar, with the same renderer as the
// webhook, instead of only adding the annotation.
func WithManual() TransformOption { return func(t *Transformer) { t.manual = true } }

// WithOutput selects the output format (default [FormatYAML]).
func WithOutput(f Format) TransformOption { return func(t *Transformer) { t.format = f } }

// WithNamespaces looks up namespaces that are not in the input (for
// example from a cluster). Namespaces in the input always win.
func WithNamespaces(l NamespaceLookup) TransformOption {
	return func(t *Transformer) { t.namespaces = l }
}

// WithVerboseReport lists every setting with its source under each
// injected workload, not only those set by annotations.
func WithVerboseReport() TransformOption { return func(t *Transformer) { t.verbose = true } }

// WithJSONReport writes each report as one JSON object per line.
func WithJSONReport() TransformOption { return func(t *Transformer) { t.jsonReport = true } }

// WithAnnotations sets config annotations (config.linkerd.io/* keys, or
// linkerd.io/inject: ingress) on every pod template that is injected and
// on every Namespace of the input, overriding what they carry; a
// config.linkerd.io/opaque-ports entry also goes on Services. This is how
// `weft inject --proxy-cpu-request=...` and its other per-setting flags
// reach the webhook, as `linkerd inject` does it. With [WithManual] the
// rendered proxy applies them too.
func WithAnnotations(m map[string]string) TransformOption {
	return func(t *Transformer) { t.overrides = m }
}

// WithUninject makes the transformer remove Weft's and Linkerd's sidecars
// (see [Uninject]) instead of adding Weft's: `weft uninject`.
func WithUninject() TransformOption { return func(t *Transformer) { t.uninject = true } }

// NewTransformer validates values and the options.
func NewTransformer(values Values, opts ...TransformOption) (*Transformer, error) {
	t := &Transformer{values: values, format: FormatYAML}
	for _, o := range opts {
		o(t)
	}
	if t.format != FormatYAML && t.format != FormatJSON {
		return nil, fmt.Errorf("inject: output format %q is not yaml or json", t.format)
	}
	if err := values.Validate(); err != nil {
		return nil, err
	}
	for k := range t.overrides {
		if k != vocab.AnnotationInject && !isConfigAnnotation(k) {
			return nil, fmt.Errorf("inject: %q is not a config annotation", k)
		}
	}
	if t.uninject && (t.manual || len(t.overrides) > 0) {
		return nil, errors.New("inject: uninject takes neither manual mode nor annotations")
	}
	return t, nil
}

// document is one parsed input document.
type document struct {
	input    string
	index    int // 1-based within its input
	raw      []byte
	json     []byte
	obj      map[string]any
	kind     string
	api      string
	changed  bool
	fromJSON bool
}

func (d *document) where() string {
	return fmt.Sprintf("%s: document %d", d.input, d.index)
}

// Transform processes inputs and writes the documents to out and one report
// per workload to reports. On any error nothing is written, and the error
// lists every problem with its input, document, kind and name.
func (t *Transformer) Transform(ctx context.Context, inputs []Input, out, reports io.Writer) ([]Report, error) {
	var docs []*document
	var errs []error
	for _, in := range inputs {
		ds, err := splitDocuments(in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, ds...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// Namespaces in the input first, so workloads anywhere in the input
	// inherit their annotations.
	inStream := map[string]*corev1.Namespace{}
	for _, d := range docs {
		if d.api == "v1" && d.kind == "Namespace" {
			var ns corev1.Namespace
			if err := strictUnmarshal(d.json, &ns); err != nil {
				errs = append(errs, fmt.Errorf("inject: %s (Namespace): %w", d.where(), err))
				continue
			}
			if !t.uninject {
				ns.Annotations = t.namespaceAnnotations(ns.Annotations)
			}
			inStream[ns.Name] = &ns
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var all []Report
	for _, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		reps, err := t.processDocument(ctx, d, inStream)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, reps...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var outBuf, repBuf bytes.Buffer
	for i, d := range docs {
		if err := t.writeDocument(&outBuf, d, i == 0); err != nil {
			return nil, err
		}
	}
	for _, r := range all {
		t.writeReport(&repBuf, r)
	}
	if _, err := out.Write(outBuf.Bytes()); err != nil {
		return nil, fmt.Errorf("inject: writing output: %w", err)
	}
	if reports != nil {
		if _, err := reports.Write(repBuf.Bytes()); err != nil {
			return nil, fmt.Errorf("inject: writing reports: %w", err)
		}
	}
	return all, nil
}

// splitDocuments splits an input into documents, skipping empty and
// comment-only ones. JSON input may hold several concatenated objects.
func splitDocuments(in Input) ([]*document, error) {
	var raws [][]byte
	trimmed := bytes.TrimLeft(in.Data, " \t\r\n")
	fromJSON := len(trimmed) > 0 && trimmed[0] == '{'
	if fromJSON {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for {
			var m json.RawMessage
			err := dec.Decode(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("inject: %s: document %d: %w", in.Name, len(raws)+1, err)
			}
			raws = append(raws, m)
		}
	} else {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(in.Data)))
		for {
			b, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("inject: %s: document %d: %w", in.Name, len(raws)+1, err)
			}
			raws = append(raws, b)
		}
	}
	var docs []*document
	for i, raw := range raws {
		d := &document{input: in.Name, index: i + 1, raw: raw, fromJSON: fromJSON}
		j, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, fmt.Errorf("inject: %s: %w", d.where(), err)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue // empty or comments only
		}
		v, err := decodeJSON(j)
		if err != nil {
			return nil, fmt.Errorf("inject: %s: %w", d.where(), err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("inject: %s: not an object", d.where())
		}
		d.json, d.obj = j, obj
		d.api, _ = obj["apiVersion"].(string)
		d.kind, _ = obj["kind"].(string)
		if d.api == "" || d.kind == "" {
			return nil, fmt.Errorf("inject: %s: missing apiVersion or kind", d.where())
		}
		docs = append(docs, d)
	}
	return docs, nil
}

func strictUnmarshal(j []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	return nil
}

func (t *Transformer) namespace(ctx context.Context, name string, inStream map[string]*corev1.Namespace) (*corev1.Namespace, error) {
	if name == "" {
		return nil, nil
	}
	if ns, ok := inStream[name]; ok {
		return ns, nil
	}
	if t.namespaces == nil {
		return nil, nil
	}
	ns, err := t.namespaces.Namespace(ctx, name)
	if errors.Is(err, ErrNamespaceNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up namespace %q: %w", name, err)
	}
	return ns, nil
}

func (t *Transformer) writeDocument(w *bytes.Buffer, d *document, first bool) error {
	switch t.format {
	case FormatJSON:
		var buf bytes.Buffer
		if err := json.Compact(&buf, d.json); err != nil {
			return fmt.Errorf("inject: %s: %w", d.where(), err)
		}
		w.Write(buf.Bytes())
		w.WriteByte('\n')
	default:
		if !first {
			w.WriteString("---\n")
		}
		body := d.raw
		if d.changed || d.fromJSON {
			y, err := yaml.JSONToYAML(d.json)
			if err != nil {
				return fmt.Errorf("inject: %s: %w", d.where(), err)
			}
			body = y
		}
		w.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			w.WriteByte('\n')
		}
	}
	return nil
}

func (t *Transformer) writeReport(w *bytes.Buffer, r Report) {
	if t.jsonReport {
		b, _ := json.Marshal(r)
		w.Write(b)
		w.WriteByte('\n')
		return
	}
	w.WriteString(r.Summary())
	w.WriteByte('\n')
	for _, s := range r.Settings {
		if t.verbose || s.Source != SourceValues {
			w.WriteString("  " + s.String() + "\n")
		}
	}
	for _, warn := range r.Warnings {
		w.WriteString("  warning: " + warn + "\n")
	}
}
