package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExampleIssuesThroughAnInProcessStepCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, nil, &out))
	assert.Contains(t, out.String(), "certificate for web.shop.serviceaccount.identity.weft.cluster.local")
	assert.Contains(t, out.String(), "issued by   CN=Weft Test Step Intermediate")
}
