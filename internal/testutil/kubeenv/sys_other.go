//go:build !linux

package kubeenv

import "syscall"

// sysProcAttr has nothing to add outside Linux: children of a test process
// that dies without Stop must be ended by hand there.
func sysProcAttr() *syscall.SysProcAttr { return nil }
