package install_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

func TestControllersUseTheChosenImagePullPolicy(t *testing.T) {
	certs := newFixture(t, "weft").certs
	for _, tc := range []struct {
		opts []install.Option
		want corev1.PullPolicy
	}{
		{nil, corev1.PullIfNotPresent},
		{[]install.Option{install.WithControllerImagePullPolicy(corev1.PullNever)}, corev1.PullNever},
		{[]install.Option{install.WithControllerImagePullPolicy(corev1.PullAlways)}, corev1.PullAlways},
	} {
		var n int
		for _, o := range render(t, inject.DefaultValues(), certs, tc.opts...).Objects {
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				assert.Equal(t, tc.want, c.ImagePullPolicy, "%s/%s", d.Name, c.Name)
				n++
			}
		}
		assert.Equal(t, 5, n, "the four controllers and the tap API")
	}
}

func TestRenderRefusesAnUnknownControllerImagePullPolicy(t *testing.T) {
	_, err := install.Render(inject.DefaultValues(), newFixture(t, "weft").certs, install.WithControllerImagePullPolicy("Sometimes"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `controller image pull policy "Sometimes"`)
}
