package kubeenv

import "syscall"

// sysProcAttr asks the kernel to kill the child when the test process dies
// without running Stop (a test timeout, a crash), so no etcd or
// kube-apiserver is left behind. The signal is tied to the thread that
// started the child; Go rarely ends threads, and Stop remains the normal path.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
