package check_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/install/check"
)

// startingSource reports the identity component not ready for its first
// notReadyRuns runs, then ready; with missingCRD, it also reports a CRD
// missing, which waiting does not cure.
type startingSource struct {
	notReadyRuns int
	missingCRD   bool
	runs         int
}

func (s *startingSource) Check(context.Context, check.Scope) check.Report {
	s.runs++
	rep := check.Report{Success: true, Results: []check.Result{{Category: check.CategoryAPI, Name: "can query the Kubernetes API", Status: check.StatusOK}}}
	if s.missingCRD {
		rep.Results = append(rep.Results, check.Result{Category: check.CategoryCRDs, Name: "CRD servers.policy.linkerd.io is installed", Status: check.StatusFail, Message: "not found"})
		rep.Success = false
	}
	if s.runs <= s.notReadyRuns {
		rep.Results = append(rep.Results, check.Result{Category: check.CategoryControlPlane, Name: "identity is ready", Status: check.StatusFail, NotReady: true,
			Message: "Deployment weft/weft-identity: 0 of 1 pods ready"})
		rep.Success = false
		return rep
	}
	rep.Results = append(rep.Results, check.Result{Category: check.CategoryControlPlane, Name: "identity is ready", Status: check.StatusOK})
	return rep
}

// fakeTimer is a clock whose timers fire at once, moving the clock on by
// the time asked for, and which records each pause.
type fakeTimer struct {
	now    time.Time
	pauses []time.Duration
}

func (f *fakeTimer) Now() time.Time { return f.now }

func (f *fakeTimer) After(d time.Duration) <-chan time.Time {
	f.pauses = append(f.pauses, d)
	f.now = f.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- f.now
	return ch
}

func TestWaitRunsTheChecksAgainUntilWhatWasNotReadyIsReady(t *testing.T) {
	src := &startingSource{notReadyRuns: 3}
	clock := &fakeTimer{now: time.Unix(1_000_000, 0)}
	var waited []time.Duration
	rep := check.Wait(testutil.Context(t, 0), src, check.Scope{}, time.Minute,
		check.WithPollInterval(2*time.Second), check.WithWaitClock(clock.Now, clock.After),
		check.OnWait(func(r check.Report, left time.Duration) {
			assert.True(t, r.OnlyNotReady())
			waited = append(waited, left)
		}))
	assert.True(t, rep.Success)
	assert.Equal(t, 4, src.runs, "three runs not ready, the fourth ready")
	assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, clock.pauses)
	assert.Equal(t, []time.Duration{time.Minute, 58 * time.Second, 56 * time.Second}, waited)
}

func TestWaitGivesUpAtTheDeadlineWithTheLastReport(t *testing.T) {
	src := &startingSource{notReadyRuns: 1000}
	clock := &fakeTimer{now: time.Unix(1_000_000, 0)}
	rep := check.Wait(testutil.Context(t, 0), src, check.Scope{}, 11*time.Second,
		check.WithPollInterval(5*time.Second), check.WithWaitClock(clock.Now, clock.After))
	assert.False(t, rep.Success)
	assert.True(t, rep.OnlyNotReady())
	assert.Equal(t, 4, src.runs, "runs at 0s, 5s, 10s and 11s")
	assert.Equal(t, []time.Duration{5 * time.Second, 5 * time.Second, time.Second}, clock.pauses, "the last pause ends at the deadline")
}

func TestWaitDoesNotWaitForFailuresThatWaitingCannotCure(t *testing.T) {
	for name, tc := range map[string]struct {
		src  *startingSource
		wait time.Duration
	}{
		"a missing CRD beside pods not ready": {&startingSource{notReadyRuns: 3, missingCRD: true}, time.Minute},
		"--wait 0":                            {&startingSource{notReadyRuns: 3}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			clock := &fakeTimer{now: time.Unix(1_000_000, 0)}
			rep := check.Wait(testutil.Context(t, 0), tc.src, check.Scope{}, tc.wait, check.WithWaitClock(clock.Now, clock.After))
			assert.False(t, rep.Success)
			assert.Equal(t, 1, tc.src.runs)
			assert.Empty(t, clock.pauses)
		})
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	src := &startingSource{notReadyRuns: 1000}
	ctx, cancel := context.WithCancel(testutil.Context(t, 0))
	never := make(chan time.Time)
	paused := 0
	rep := check.Wait(ctx, src, check.Scope{}, time.Hour, check.WithWaitClock(time.Now, func(time.Duration) <-chan time.Time {
		paused++
		cancel()
		return never
	}))
	assert.False(t, rep.Success)
	assert.Equal(t, 1, src.runs)
	assert.Equal(t, 1, paused)
}

// A control plane just applied: the Deployments have pods that are not
// ready and the injector's Service no ready endpoints. Those failures are
// NotReady; a missing Deployment is not.
func TestFailuresOfThingsStartingAreNotReadyAndOthersAreNot(t *testing.T) {
	c := healthyCluster(t, "weft")
	pods := must(c.kube.CoreV1().Pods("weft").List(bg, metav1.ListOptions{LabelSelector: install.LabelComponent + "=identity"}))
	require.Len(t, pods.Items, 1)
	p := pods.Items[0]
	p.Status.Conditions = nil
	_, err := c.kube.CoreV1().Pods("weft").Update(bg, &p, metav1.UpdateOptions{})
	require.NoError(t, err)
	eps := c.kube.DiscoveryV1().EndpointSlices("weft")
	s := must(eps.Get(bg, install.ServiceInjector+"-abcde", metav1.GetOptions{}))
	s.Endpoints[0].Conditions.Ready = ptr(false)
	_, err = eps.Update(bg, s, metav1.UpdateOptions{})
	require.NoError(t, err)

	r := c.run(t, check.Scope{})
	assert.False(t, r.Success)
	assert.True(t, r.OnlyNotReady(), "%+v", r.Results)
	assert.True(t, result(t, r, check.CategoryControlPlane, "identity is ready").NotReady)
	assert.True(t, result(t, r, check.CategoryWebhooks, "MutatingWebhookConfiguration weft-proxy-injector-webhook-config points at a live service").NotReady)

	require.NoError(t, c.kube.AppsV1().Deployments("weft").Delete(bg, "weft-policy", metav1.DeleteOptions{}))
	r = c.run(t, check.Scope{})
	pol := result(t, r, check.CategoryControlPlane, "policy is ready")
	assert.Equal(t, check.StatusFail, pol.Status)
	assert.False(t, pol.NotReady, "a Deployment not found does not come by waiting")
	assert.False(t, r.OnlyNotReady())
}
