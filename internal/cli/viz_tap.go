package cli

import (
	"context"
	"errors"
)

func runVizTap(ctx context.Context, args []string, stdio IO) int {
	return vizFail(stdio, "tap", errors.New("not built yet"), ExitFailure)
}

func runVizTop(ctx context.Context, args []string, stdio IO) int {
	return vizFail(stdio, "top", errors.New("not built yet"), ExitFailure)
}
