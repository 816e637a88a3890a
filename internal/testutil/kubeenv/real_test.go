//go:build kubeintegration

package kubeenv_test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/internal/testutil/kubeenv"
)

// TestStartRunsARealControlPlane starts the real etcd and kube-apiserver
// (see hack/kube-testenv.sh), checks what the package promises, and checks
// that Stop leaves nothing behind. In CI (CI=true) missing binaries fail it.
func TestStartRunsARealControlPlane(t *testing.T) {
	if _, err := kubeenv.FindBinaries(startCtx(t)); err != nil && os.Getenv("CI") != "true" {
		t.Skipf("no binaries outside CI: %v", err)
	}
	began := time.Now()
	env := kubeenv.New(t)
	t.Logf("control plane ready in %s", time.Since(began).Round(time.Millisecond))
	ctx := startCtx(t)
	client, err := kubernetes.NewForConfig(env.Config())
	require.NoError(t, err)

	// The server reports its release (hack/kube-testenv.sh stamps it), as
	// tools that check the Kubernetes version expect.
	v, err := client.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "1", v.Major, "server version %s: rebuild the binary with hack/kube-testenv.sh, which stamps the release", v.GitVersion)
	t.Logf("server version %s", v.GitVersion)

	// The admin may do everything, and is who the package says.
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, kubeenv.AdminUser, review.Status.UserInfo.Username)
	assert.Contains(t, review.Status.UserInfo.Groups, "system:masters")

	// Service-account tokens are issued by the configured issuer.
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeenv"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ServiceAccounts("kubeenv").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := client.CoreV1().ServiceAccounts("kubeenv").CreateToken(ctx, "sa", &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{"test"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: tok.Status.Token, Audiences: []string{"test"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, tr.Status.Authenticated, "token review: %s", tr.Status.Error)
	assert.Equal(t, "system:serviceaccount:kubeenv:sa", tr.Status.User.Username)

	etcdPID, apiPID := env.PIDs()
	dir := env.Dir()
	began = time.Now()
	require.NoError(t, env.Stop())
	t.Logf("control plane stopped in %s", time.Since(began).Round(time.Millisecond))
	assert.NoDirExists(t, dir)
	assert.ErrorIs(t, syscall.Kill(etcdPID, 0), syscall.ESRCH, "etcd still running")
	assert.ErrorIs(t, syscall.Kill(apiPID, 0), syscall.ESRCH, "kube-apiserver still running")
}
