package inject

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

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
	case (apiVersion == "batch/v1" || apiVersion == "batch/v1beta1") && kind == "CronJob":
		// batch/v1beta1 (served until Kubernetes 1.25) has the same shape.
		return "/spec/jobTemplate/spec/template", true
	}
	return "", false
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
