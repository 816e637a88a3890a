package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
)

// Reasons of the report lines of documents that are not workloads, and of
// `weft uninject`.
const (
	// ReasonUnsupportedKind: the document is not a workload (nor a
	// Namespace or Service the flags annotate); it passes through unchanged.
	ReasonUnsupportedKind Reason = "unsupported-kind"
	// ReasonNullItem: a null entry in a v1 List, kept as it is.
	ReasonNullItem Reason = "null-item"
	// ReasonNothingToRemove: `weft uninject` found no sidecar.
	ReasonNothingToRemove Reason = "not-injected"
)

// processDocument handles one document: a v1 List item by item, a
// Namespace, a Service, a workload, or anything else (passed through).
// Every document gets a report line.
func (t *Transformer) processDocument(ctx context.Context, d *document, inStream map[string]*corev1.Namespace) ([]Report, error) {
	if d.api == "v1" && d.kind == "List" {
		return t.processList(ctx, d, inStream)
	}
	newObj, rep, changed, err := t.processObject(ctx, d.where(), d.api, d.kind, d.json, inStream)
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

// processList handles the items of a v1 List; null items are kept and
// reported as skipped, as linkerd inject does.
func (t *Transformer) processList(ctx context.Context, d *document, inStream map[string]*corev1.Namespace) ([]Report, error) {
	items, _ := d.obj["items"].([]any)
	var reports []Report
	var errs []error
	for i, it := range items {
		where := fmt.Sprintf("%s, items[%d]", d.where(), i)
		if it == nil {
			reports = append(reports, Report{Reason: ReasonNullItem, Message: where + " is null; kept as it is"})
			continue
		}
		m, ok := it.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("inject: %s is not an object", where))
			continue
		}
		api, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		if api == "" || kind == "" {
			errs = append(errs, fmt.Errorf("inject: %s: missing apiVersion or kind", where))
			continue
		}
		sub, err := json.Marshal(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("inject: %s: %w", where, err))
			continue
		}
		newItem, rep, changed, err := t.processObject(ctx, where, api, kind, sub, inStream)
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

// processObject dispatches one object by kind and returns the new object
// (decoded JSON) when it changed.
func (t *Transformer) processObject(ctx context.Context, where, api, kind string, j []byte, inStream map[string]*corev1.Namespace) (any, Report, bool, error) {
	switch {
	case api == "v1" && kind == "Namespace":
		return t.processMeta(where, kind, j, t.namespaceAnnotations)
	case api == "v1" && kind == "Service":
		return t.processMeta(where, kind, j, t.serviceAnnotations)
	}
	if _, ok := templatePointer(api, kind); ok {
		return t.processWorkload(ctx, where, api, kind, j, inStream)
	}
	var meta struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	}
	_ = json.Unmarshal(j, &meta)
	return nil, Report{Kind: kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace,
		Reason: ReasonUnsupportedKind, Message: fmt.Sprintf("%s %s is not a workload; passed through unchanged", api, kind)}, false, nil
}

// namespaceAnnotations are the annotations a Namespace gets: the flags'
// overrides and linkerd.io/inject: enabled, as linkerd inject writes them.
func (t *Transformer) namespaceAnnotations(have map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, t.overrides)
	if out[vocab.AnnotationInject] != vocab.InjectEnabled {
		// ingress is a per-workload mode; a namespace asks for enabled.
		out[vocab.AnnotationInject] = vocab.InjectEnabled
	}
	return out
}

// serviceAnnotations are the annotations a Service gets: only the opaque
// ports, which discovery reads from Services.
func (t *Transformer) serviceAnnotations(have map[string]string) map[string]string {
	v, ok := t.overrides[vocab.AnnotationOpaquePorts]
	if !ok {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	out[vocab.AnnotationOpaquePorts] = v
	return out
}

// processMeta annotates (or, uninjecting, strips) a Namespace or Service.
func (t *Transformer) processMeta(where, kind string, j []byte, want func(map[string]string) map[string]string) (any, Report, bool, error) {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	var err error
	if kind == "Namespace" {
		var ns corev1.Namespace
		err = strictUnmarshal(j, &ns)
		obj.Metadata = ns.ObjectMeta
	} else {
		var svc corev1.Service
		err = strictUnmarshal(j, &svc)
		obj.Metadata = svc.ObjectMeta
	}
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s (%s): %w", where, kind, err)
	}
	m := obj.Metadata
	rep := Report{Kind: kind, Name: m.Name, Namespace: m.Namespace}
	var patch Patch
	if t.uninject {
		pod := &corev1.Pod{ObjectMeta: m}
		_, controlPlane := m.Labels[vocab.LabelControlPlaneComponent]
		s := strip(pod, func(string) bool { return false }, func(string) bool { return false }, !controlPlane,
			func(k, v string) bool { return k == vocab.AnnotationInject && v == vocab.InjectDisabled })
		patch = replaceOps(pod, s)
		rep.Uninjected = len(patch) > 0
	} else {
		next := want(m.Annotations)
		patch = mapOps("/metadata/annotations", m.Annotations, changedEntries(m.Annotations, next))
		rep.Annotated = len(patch) > 0
		if rep.Annotated && kind == "Namespace" && m.Annotations[vocab.AnnotationInject] == vocab.InjectDisabled {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("namespace %q said %s: disabled; it now says enabled", m.Name, vocab.AnnotationInject))
		}
	}
	if len(patch) == 0 {
		rep.Reason = ReasonUnsupportedKind
		rep.Message = "a Service has no pod template; passed through unchanged"
		if kind == "Namespace" {
			rep.Message = fmt.Sprintf("already has %s: enabled", vocab.AnnotationInject)
		}
		if t.uninject {
			rep.Reason, rep.Message = ReasonNothingToRemove, "no linkerd.io annotation or label to remove"
		}
		return nil, rep, false, nil
	}
	root, err := applyAt(j, "", patch)
	if err != nil {
		return nil, Report{}, false, fmt.Errorf("inject: %s (%s %s): %w", where, kind, m.Name, err)
	}
	return root, rep, true, nil
}

// changedEntries returns the entries of want that have does not hold with
// the same value.
func changedEntries(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			out[k] = v
		}
	}
	return out
}

// applyAt applies patch to the JSON object j below the pointer ptr,
// creating ptr's metadata when the object leaves it out.
func applyAt(j []byte, ptr string, patch Patch) (any, error) {
	root, err := decodeJSON(j)
	if err != nil {
		return nil, err
	}
	if _, err := walk(root, mustPointer(ptr+"/metadata")); err != nil {
		patch = append(Patch{{Op: "add", Path: "/metadata", Value: map[string]any{}}}, patch...)
	}
	return patch.WithPrefix(ptr).applyTo(root)
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

	var patch Patch
	var report Report
	if t.uninject {
		report = Report{Kind: kind, Name: meta.Name, Namespace: meta.Namespace}
		patch, report.Removed = Uninject(pod)
		report.Uninjected = len(patch) > 0
		if !report.Uninjected {
			report.Reason, report.Message = ReasonNothingToRemove, "no Weft or Linkerd sidecar to remove"
		}
	} else {
		ns, err := t.namespace(ctx, meta.Namespace, inStream)
		if err != nil {
			return nil, Report{}, false, fmt.Errorf("inject: %s: %w", label, err)
		}
		// The flags' annotations go on the template first; the renderer
		// then sees them as the pod's own.
		overridden := pod.DeepCopy()
		overridden.Annotations = maps.Clone(pod.Annotations)
		if len(t.overrides) > 0 {
			if overridden.Annotations == nil {
				overridden.Annotations = map[string]string{}
			}
			maps.Copy(overridden.Annotations, t.overrides)
		}
		if t.manual {
			patch, report, err = Render(overridden, ns, t.values, WithDefaultMode(vocab.InjectEnabled), WithObject(kind, meta.Name))
		} else {
			patch, report, err = t.annotate(overridden, ns, kind, meta.Name)
		}
		if err != nil {
			return nil, Report{}, false, fmt.Errorf("inject: %s: %w", label, err)
		}
		if report.Reason == ReasonOtherMesh {
			return nil, Report{}, false, fmt.Errorf("inject: %s: cannot inject: %s", label, report.Message)
		}
		if report.Injected {
			patch = append(mapOps("/metadata/annotations", pod.Annotations, changedEntries(pod.Annotations, t.overrides)), patch...)
		}
	}
	report.Namespace = meta.Namespace
	if len(patch) == 0 {
		return nil, report, false, nil
	}
	newRoot, err := applyAt(j, ptr, patch)
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
// enabled. A template Linkerd injected loses Linkerd's sidecar, so that the
// webhook adds Weft's alone.
func (t *Transformer) annotate(pod *corev1.Pod, ns *corev1.Namespace, kind, name string) (Patch, Report, error) {
	if c, ok := pod.Labels[vocab.LabelControlPlaneComponent]; ok {
		// The webhook's object selector leaves these pods out, so the
		// annotation alone would silently do nothing (linkerd inject
		// refuses them too).
		return nil, Report{}, fmt.Errorf("inject: %s %q is a control-plane component (%s=%s), which the webhook never injects: use --manual", strings.ToLower(kind), name, vocab.LabelControlPlaneComponent, c)
	}
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
	var patch Patch
	base := pod
	if mig := stripLinkerd(pod); mig.changed() {
		patch = replaceOps(pod, mig)
		base = mig.pod
	}
	if !has {
		patch = append(patch, mapOps("/metadata/annotations", base.Annotations, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled})...)
	}
	return patch, report, nil
}
