package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weftmesh/weft/mesh/install"
)

func policyPod(name string, phase corev1.PodPhase, ready bool, component string) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "weft", Labels: map[string]string{install.LabelComponent: component}},
		Status:     corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func TestDiagnosticsPolicyAsksTheFirstReadyPolicyControllerPod(t *testing.T) {
	kube := fake.NewClientset(
		policyPod("weft-policy-c", corev1.PodRunning, true, "policy"),
		policyPod("weft-policy-a", corev1.PodRunning, false, "policy"),
		policyPod("weft-policy-b", corev1.PodRunning, true, "policy"),
		policyPod("weft-destination-a", corev1.PodRunning, true, "destination"),
	)
	pod, err := readyPolicyPod(context.Background(), kube, "weft")
	require.NoError(t, err)
	assert.Equal(t, "weft-policy-b", pod, "ready ones only, the first by name")
}

func TestDiagnosticsPolicySaysWhenNoPolicyControllerIsReady(t *testing.T) {
	kube := fake.NewClientset(
		policyPod("weft-policy-a", corev1.PodPending, false, "policy"),
		policyPod("weft-destination-a", corev1.PodRunning, true, "destination"),
	)
	_, err := readyPolicyPod(context.Background(), kube, "weft")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no ready policy controller pod in weft")
}
