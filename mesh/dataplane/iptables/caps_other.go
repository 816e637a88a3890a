//go:build !linux

package iptables

import "os/exec"

// NetCapabilities returns nil: capabilities are a Linux matter.
func NetCapabilities() ([]uintptr, error) { return nil, nil }

func withAmbient(*exec.Cmd, []uintptr) {}
