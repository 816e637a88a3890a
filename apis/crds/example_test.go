package crds_test

import (
	"fmt"

	"github.com/weftmesh/weft/apis/crds"
)

func ExampleAll() {
	all, err := crds.All()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				fmt.Println(crd.Name, "stored as", v.Name)
			}
		}
	}
	// Output:
	// authorizationpolicies.policy.linkerd.io stored as v1alpha1
	// egressnetworks.policy.linkerd.io stored as v1alpha1
	// httplocalratelimitpolicies.policy.linkerd.io stored as v1alpha1
	// httproutes.policy.linkerd.io stored as v1beta3
	// meshtlsauthentications.policy.linkerd.io stored as v1alpha1
	// networkauthentications.policy.linkerd.io stored as v1alpha1
	// serverauthorizations.policy.linkerd.io stored as v1beta1
	// servers.policy.linkerd.io stored as v1beta3
	// serviceprofiles.linkerd.io stored as v1alpha2
}
