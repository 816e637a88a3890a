//go:build clusterintegration

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// demoRollingRestarts restarts the demo's api and web (`kubectl rollout
// restart`, one after the other) while a client calls web's /empty,
// which reaches api's EmptyCall (never failed on purpose): not one call
// fails. The client is step 3e's intruder, admitted again once 3e's
// policy is gone, so that the demo's own load generator keeps its own
// counts.
func (m *mesh) demoRollingRestarts(t *testing.T) {
	e := m.e
	ns := m.demoNS
	require.NotEmpty(t, ns, "step 3d deployed the demo application")
	client := e.onePod(t, ns, "intruder")
	eventually(t, time.Minute, "the client's calls to web's /empty succeed", func(context.Context) error {
		if c := e.call(t, client, "http://web:8080/empty", "restart", 3); c.OK != 3 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	l := e.startLoad(t, client, "http://web:8080/empty", "restart")
	stopped := false
	defer func() {
		if !stopped {
			l.stop(t)
		}
	}()
	for _, d := range []string{"api", "web", "api"} {
		before := e.onePod(t, ns, d)
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
		_, err := e.kube.AppsV1().Deployments(ns).Patch(timeout(t, time.Minute), d, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, 3*time.Minute, "deployment "+ns+"/"+d+" rolled out again", func(ctx context.Context) error {
			if err := e.rolledOut(ctx, ns, d); err != nil {
				return err
			}
			if p := e.onePod(t, ns, d); p.UID == before.UID {
				return fmt.Errorf("pod %s not replaced yet", p.Name)
			}
			return nil
		})
	}
	c := l.stop(t)
	stopped = true
	result(t, "demo: 3 rolling restarts (api, web, api) under calls to web", c)
	assert.Positive(t, c.OK, "calls went through: %+v", c)
	assert.Zero(t, c.Failed, "no call failed across the restarts: %+v", c)
}
