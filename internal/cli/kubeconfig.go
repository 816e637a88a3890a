package cli

import (
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeRESTConfig loads the client configuration the way kubectl does:
// kubeconfig when given (else $KUBECONFIG, else ~/.kube/config), its
// kubeContext when given (else the current context), with every request
// bounded by timeout.
func kubeRESTConfig(kubeconfig, kubeContext string, timeout time.Duration) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = timeout
	return cfg, nil
}
