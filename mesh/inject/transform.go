package inject

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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

// MaxInputBytes bounds one input file or stream of [ReadInputs].
const MaxInputBytes = 32 << 20

// Input is one named stream of YAML or JSON documents.
type Input struct {
	// Name is shown in errors ("web.yaml", "-" for stdin).
	Name string
	Data []byte
}

// ReadInputs reads the arguments of `weft inject`: files, directories
// (walked recursively for .yaml, .yml and .json files, in lexical order),
// or "-" for stdin. Each input is limited to [MaxInputBytes].
func ReadInputs(paths []string, stdin io.Reader) ([]Input, error) {
	var out []Input
	for _, p := range paths {
		if p == "-" {
			if stdin == nil {
				return nil, errors.New("inject: no stdin to read")
			}
			data, err := readLimited(stdin, "-")
			if err != nil {
				return nil, err
			}
			out = append(out, Input{Name: "-", Data: data})
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("inject: %w", err)
		}
		if !info.IsDir() {
			in, err := readFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("inject: %w", err)
		}
		sort.Strings(files)
		for _, f := range files {
			in, err := readFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}

func readFile(path string) (Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return Input{}, fmt.Errorf("inject: %w", err)
	}
	defer f.Close()
	data, err := readLimited(f, path)
	return Input{Name: path, Data: data}, err
}

func readLimited(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("inject: %s: %w", name, err)
	}
	if len(data) > MaxInputBytes {
		return nil, fmt.Errorf("inject: %s: larger than %d bytes", name, MaxInputBytes)
	}
	return data, nil
}

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

// workload kinds and the JSON Pointer of their pod template.
func templatePointer(apiVersion, kind string) (string, bool) {
	switch {
	case apiVersion == "v1" && kind == "Pod":
		return "", true
	case apiVersion == "v1" && kind == "ReplicationController":
		return "/spec/template", true
	case apiVersion == "apps/v1" && (kind == "Deployment" || kind == "DaemonSet" || kind == "StatefulSet" || kind == "ReplicaSet"):
		return "/spec/template", true
	case apiVersion == "batch/v1" && kind == "Job":
		return "/spec/template", true
	case apiVersion == "batch/v1" && kind == "CronJob":
		return "/spec/jobTemplate/spec/template", true
	}
	return "", false
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

// processDocument handles a workload, a List of them, or passes the
// document through.
func (t *Transformer) processDocument(ctx context.Context, d *document, inStream map[string]*corev1.Namespace) ([]Report, error) {
	if d.api == "v1" && d.kind == "List" {
		items, _ := d.obj["items"].([]any)
		var reports []Report
		var errs []error
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("inject: %s: items[%d] is not an object", d.where(), i))
				continue
			}
			api, _ := m["apiVersion"].(string)
			kind, _ := m["kind"].(string)
			if _, ok := templatePointer(api, kind); !ok {
				continue
			}
			sub, _ := json.Marshal(m)
			newItem, rep, changed, err := t.processWorkload(ctx, fmt.Sprintf("%s, items[%d]", d.where(), i), api, kind, sub, inStream)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			reports = append(reports, rep)
			if changed {
				items[i] = newItem
				d.changed = true
			}
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		if d.changed {
			d.obj["items"] = items
			b, err := json.Marshal(d.obj)
			if err != nil {
				return nil, fmt.Errorf("inject: %s: %w", d.where(), err)
			}
			d.json = b
		}
		return reports, nil
	}
	if _, ok := templatePointer(d.api, d.kind); !ok {
		return nil, nil
	}
	newObj, rep, changed, err := t.processWorkload(ctx, d.where(), d.api, d.kind, d.json, inStream)
	if err != nil {
		return nil, err
	}
	if changed {
		b, err := json.Marshal(newObj)
		if err != nil {
			return nil, fmt.Errorf("inject: %s: %w", d.where(), err)
		}
		d.json, d.changed = b, true
	}
	return []Report{rep}, nil
}

// processWorkload renders one workload given as JSON and returns the new
// object (decoded JSON) when it changed.
func (t *Transformer) processWorkload(ctx context.Context, where, api, kind string, j []byte, inStream map[string]*corev1.Namespace) (any, Report, bool, error) {
	ptr, _ := templatePointer(api, kind)
	meta, tmpl, err := decodeWorkload(kind, j)
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s (%s): %w", where, kind, err)
	}
	label := fmt.Sprintf("%s (%s %s)", where, kind, qualify(meta.Namespace, meta.Name))
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Namespace = meta.Namespace
	if pod.Name == "" {
		pod.Name = meta.Name
	}
	ns, err := t.namespace(ctx, meta.Namespace, inStream)
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s: %w", label, err)
	}

	var patch Patch
	var report Report
	if t.manual {
		patch, report, err = Render(pod, ns, t.values, WithDefaultMode(vocab.InjectEnabled), WithObject(kind, meta.Name))
	} else {
		patch, report, err = t.annotate(pod, ns, kind, meta.Name)
	}
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s: %w", label, err)
	}
	report.Namespace = meta.Namespace
	if len(patch) == 0 {
		return nil, report, false, nil
	}
	root, err := decodeJSON(j)
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s: %w", label, err)
	}
	// A pod template may leave out metadata; the patch adds to it.
	if _, err := walk(root, mustPointer(ptr+"/metadata")); err != nil {
		patch = append(Patch{{Op: "add", Path: "/metadata", Value: map[string]any{}}}, patch...)
	}
	newRoot, err := patch.WithPrefix(ptr).applyTo(root)
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s: %w", label, err)
	}
	return newRoot, report, true, nil
}

func mustPointer(p string) []string {
	toks, _ := parsePointer(p)
	return toks
}

// annotate is the default mode: it runs the webhook's checks on the pod as
// if it asked for injection and, if they pass, adds linkerd.io/inject:
// enabled.
func (t *Transformer) annotate(pod *corev1.Pod, ns *corev1.Namespace, kind, name string) (Patch, Report, error) {
	current, has := pod.Annotations[vocab.AnnotationInject]
	probe := pod.DeepCopy()
	if !has || current == vocab.InjectEnabled {
		if probe.Annotations == nil {
			probe.Annotations = map[string]string{}
		}
		probe.Annotations[vocab.AnnotationInject] = vocab.InjectEnabled
	}
	_, report, err := Render(probe, ns, t.values, WithObject(kind, name))
	if err != nil || !report.Injected {
		return nil, report, err
	}
	// The proxy itself is rendered later, by the webhook, with the
	// cluster's values: warnings about these values do not apply.
	report.Warnings = slices.DeleteFunc(report.Warnings, func(w string) bool { return strings.HasPrefix(w, warnNoTrustAnchors) })
	if !has {
		for i, s := range report.Settings {
			if s.Name == "inject" {
				report.Settings[i] = Setting{Name: "inject", Value: vocab.InjectEnabled, Source: SourceCaller}
			}
		}
	}
	if has {
		return nil, report, nil // enabled or ingress already
	}
	return mapOps("/metadata/annotations", pod.Annotations, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled}), report, nil
}

// decodeWorkload strictly decodes a workload and returns its metadata and
// pod template.
func decodeWorkload(kind string, j []byte) (*metaOnly, *corev1.PodTemplateSpec, error) {
	var meta metaOnly
	switch kind {
	case "Pod":
		var o corev1.Pod
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		meta = metaOnly{o.Name, o.Namespace}
		o.Namespace = ""
		return &meta, &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}, nil
	case "ReplicationController":
		var o corev1.ReplicationController
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		if o.Spec.Template == nil {
			return nil, nil, errors.New("spec.template is missing")
		}
		return &metaOnly{o.Name, o.Namespace}, o.Spec.Template, nil
	case "Deployment":
		var o appsv1.Deployment
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		return &metaOnly{o.Name, o.Namespace}, &o.Spec.Template, nil
	case "DaemonSet":
		var o appsv1.DaemonSet
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		return &metaOnly{o.Name, o.Namespace}, &o.Spec.Template, nil
	case "StatefulSet":
		var o appsv1.StatefulSet
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		return &metaOnly{o.Name, o.Namespace}, &o.Spec.Template, nil
	case "ReplicaSet":
		var o appsv1.ReplicaSet
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		return &metaOnly{o.Name, o.Namespace}, &o.Spec.Template, nil
	case "Job":
		var o batchv1.Job
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		return &metaOnly{o.Name, o.Namespace}, &o.Spec.Template, nil
	case "CronJob":
		var o batchv1.CronJob
		if err := strictUnmarshal(j, &o); err != nil {
			return nil, nil, err
		}
		return &metaOnly{o.Name, o.Namespace}, &o.Spec.JobTemplate.Spec.Template, nil
	}
	return nil, nil, fmt.Errorf("kind %s is not a workload", kind)
}

type metaOnly struct{ Name, Namespace string }

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
