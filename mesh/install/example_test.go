package install_test

import (
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/install"
)

// Render a high-availability install with freshly generated certificates,
// serialize it and read it back strictly.
func ExampleRender() {
	now := time.Now()
	id, _, err := install.GenerateIdentity(now)
	if err != nil {
		panic(err)
	}
	hook, err := install.GenerateWebhook("weft", "cluster.local", now)
	if err != nil {
		panic(err)
	}
	m, err := install.Render(inject.DefaultValues(), install.Certificates{Identity: id, Webhook: hook}, install.WithHA())
	if err != nil {
		panic(err)
	}
	data, err := m.YAML()
	if err != nil {
		panic(err)
	}
	objs, err := install.Decode(data)
	if err != nil {
		panic(err)
	}
	count := map[string]int{}
	for _, o := range objs {
		count[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	fmt.Println(count["CustomResourceDefinition"], "CRDs,", count["Deployment"], "Deployments,", count["PodDisruptionBudget"], "PodDisruptionBudgets")
	// Output: 9 CRDs, 4 Deployments, 4 PodDisruptionBudgets
}
