package testutil

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ProcessCPU returns the CPU time (user plus system) another process has
// used so far: its process-wide CPU clock when the kernel gives it (to the
// nanosecond), else the tick counts of /proc/PID/stat (to 10 ms).
// Benchmarks that run the measured server in a process of its own read it
// before and after a load.
func ProcessCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	// clock_getcpuclockid's encoding of a process's clock:
	// (^pid << 3) | CPUCLOCK_SCHED.
	clk := (^int64(pid) << 3) | 2
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clk), uintptr(unsafe.Pointer(&ts)), 0); e == 0 {
		return time.Duration(ts.Nano())
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatalf("testutil: process %d's CPU: %v", pid, err)
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 14th and 15th of the line, the 12th and 13th after it.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 13 {
		tb.Fatalf("testutil: process %d's stat has %d fields after its name", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		tb.Fatalf("testutil: process %d's stat: %v", pid, err)
	}
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
}
