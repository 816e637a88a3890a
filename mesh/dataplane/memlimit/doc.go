// Package memlimit sets the Go runtime's soft memory limit (GOMEMLIMIT)
// from the memory limit of the container a process runs in, which the Go
// runtime does not read by itself.
//
// The limit is read once, from the cgroup the process belongs to: cgroup
// v2's memory.max, or cgroup v1's memory.limit_in_bytes, under a root path
// (the host's "/" in production, a fake tree in tests). A fraction of it
// (DefaultFraction) becomes the runtime's limit, leaving the rest for what
// the limit does not cover (the mapped binary, kernel socket buffers) and
// for the garbage collector to act before the container is killed. An
// explicit GOMEMLIMIT variable always wins (GOMEMLIMIT=off turns the
// derivation off); GOGC is left as it is.
//
// What it trusts: the cgroup files are the kernel's. A missing file means
// no limit; a file whose content is not a limit is an error naming the
// file, and nothing is set.
package memlimit
