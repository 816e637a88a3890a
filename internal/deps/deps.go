//go:build weftdeps

// Package deps pins modules that packages under construction will import,
// so go.sum stays complete while they are written in parallel. It is removed
// once every module here is imported by real code.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-kit/kit/metrics"
	_ "github.com/go-kit/kit/metrics/prometheus"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/smallstep/certificates/authority"
	_ "github.com/smallstep/certificates/authority/provisioner"
	_ "github.com/smallstep/certificates/ca"
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "golang.org/x/net/http2"
	_ "golang.org/x/sync/errgroup"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
	_ "google.golang.org/grpc/reflection"
	_ "google.golang.org/grpc/interop"
	_ "google.golang.org/protobuf/encoding/protowire"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/admission/v1"
	_ "k8s.io/apimachinery/pkg/runtime/serializer/json"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/gateway-api/apis/v1"
	_ "sigs.k8s.io/yaml"
	_ "go.step.sm/crypto/jose"
	_ "go.step.sm/crypto/pemutil"
)
