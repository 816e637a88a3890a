package local

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Environ returns the variables that tell a pod's program where it is:
//
//	WEFT_POD_IP, WEFT_POD_NAME, WEFT_NAMESPACE, WEFT_WORKLOAD,
//	WEFT_SERVICE_ACCOUNT, WEFT_IDENTITY
//	WEFT_PORT                    the first port
//	WEFT_PORT_<NAME>             each named port (HTTP for "http")
//	WEFT_OUTBOUND_<SERVICE>      IP:PORT to connect to for the first call of SERVICE
//	WEFT_OUTBOUND_<SERVICE>_<PORT>  the same for each service port
//	WEFT_PROXY_ADMIN             the proxy's admin address (/metrics, /ready)
//
// plus the workload's own Env. Names are upper-cased with '-' and '.' as '_'.
func (p Pod) Environ() map[string]string {
	env := map[string]string{
		"WEFT_POD_IP":          p.IP.String(),
		"WEFT_POD_NAME":        p.Name,
		"WEFT_NAMESPACE":       p.Namespace,
		"WEFT_WORKLOAD":        p.Workload,
		"WEFT_SERVICE_ACCOUNT": p.ServiceAccount,
		"WEFT_IDENTITY":        p.Identity,
		"WEFT_PROXY_ADMIN":     p.Admin.String(),
	}
	for i, port := range p.Ports {
		if i == 0 {
			env["WEFT_PORT"] = strconv.Itoa(port.Port)
		}
		if port.Name != "" {
			env["WEFT_PORT_"+envName(port.Name)] = strconv.Itoa(port.Port)
		}
	}
	for _, m := range p.Mappings {
		_, svc, _ := strings.Cut(m.Service, "/")
		key := "WEFT_OUTBOUND_" + envName(svc)
		if _, ok := env[key]; !ok {
			env[key] = m.Listen.String()
		}
		env[key+"_"+strconv.Itoa(m.Port)] = m.Listen.String()
	}
	for k, v := range p.Env {
		env[k] = v
	}
	return env
}

func envName(s string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(s))
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// ExpandCommand replaces $(VAR) in each argument with env[VAR], as
// Kubernetes does in a container's command; unknown references stay as
// they are.
func ExpandCommand(args []string, env map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = varRef.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// runProcess runs a pod's command until it exits or ctx ends (then it gets
// SIGTERM, and SIGKILL 5s later). An exit before ctx ends is an error
// unless its status is 0.
func runProcess(ctx context.Context, pod Pod, stdout, stderr io.Writer, log *slog.Logger) error {
	env := pod.Environ()
	lookup := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			lookup[k] = v
		}
	}
	for k, v := range env {
		lookup[k] = v
	}
	args := ExpandCommand(pod.Command, lookup)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var wg sync.WaitGroup
	prefix := func(w io.Writer) io.Writer {
		if w == nil {
			w = io.Discard
		}
		pr, pw := io.Pipe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				fmt.Fprintf(w, "[%s] %s\n", pod.Name, sc.Text())
			}
			_, _ = io.Copy(io.Discard, pr)
		}()
		return pw
	}
	outW, errW := prefix(stdout), prefix(stderr)
	cmd.Stdout, cmd.Stderr = outW, errW
	log.Info("starting program", "pod", pod.Name, "command", strings.Join(args, " "))
	err := cmd.Run()
	outW.(*io.PipeWriter).Close()
	errW.(*io.PipeWriter).Close()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local: program of %s (%s): %w", pod.Name, args[0], err)
	}
	log.Info("program exited", "pod", pod.Name, "status", 0)
	return nil
}
