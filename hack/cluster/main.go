// Command cluster starts, finds and removes the local single-node
// Kubernetes cluster of internal/tools/cluster. hack/cluster.sh builds the
// binaries it needs and runs it; use that (or the make targets):
//
//	cluster up --etcd F --apiserver F --node-dir D --coredns F --pause F
//	cluster down
//	cluster env        print export KUBECONFIG=... and export PATH=...
//	cluster status
//	cluster load FILE  import a docker-archive tarball into the node
//
// The cluster is named by $WEFT_CLUSTER_NAME (default weft) and kept in
// $WEFT_CLUSTER_DIR (default ~/.cache/weft/cluster/<name>).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/weftmesh/weft/internal/tools/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: cluster up|down|env|status|load|forward")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cmd, args := args[0], args[1:]
	if cmd == "forward" {
		return forward(ctx, args)
	}
	l, err := cluster.LayoutFromEnv()
	if err != nil {
		return err
	}
	unlock, err := lock(l)
	if err != nil {
		return err
	}
	defer unlock()
	switch cmd {
	case "up":
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		var b cluster.Binaries
		fs.StringVar(&b.Etcd, "etcd", "", "etcd binary")
		fs.StringVar(&b.APIServer, "apiserver", "", "kube-apiserver binary")
		fs.StringVar(&b.NodeDir, "node-dir", "", "directory of kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl")
		fs.StringVar(&b.CoreDNS, "coredns", "", "coredns binary")
		fs.StringVar(&b.Pause, "pause", "", "pause binary")
		timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
		if err := fs.Parse(args); err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		b.Self = self
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		s, err := cluster.Up(ctx, l, b, log)
		if err != nil {
			return err
		}
		fmt.Printf("The cluster %q is up. For kubectl (%s):\n\n%s", s.Name, filepath.Join(s.BinDir, "kubectl"), s.Env())
		return nil
	case "down":
		return cluster.Down(l, log)
	case "env":
		s, err := cluster.Load(l)
		if err != nil {
			return err
		}
		fmt.Print(s.Env())
		return nil
	case "status":
		s, err := cluster.Load(l)
		if err != nil {
			return err
		}
		fmt.Printf("cluster %s is up: kubeconfig %s, API server forwarded from %s, %d processes\n", s.Name, s.Kubeconfig, s.ForwardAddr, len(s.Procs)+1)
		return nil
	case "load":
		if len(args) != 1 {
			return errors.New("usage: cluster load FILE")
		}
		if _, err := cluster.Load(l); err != nil {
			return err
		}
		return cluster.ImportArchive(ctx, l, args[0])
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// lock serializes commands on one cluster (a second `up` waits for the
// first, then finds its cluster).
func lock(l cluster.Layout) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(l.Dir), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(l.Dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// forward is the API server forwarder: it serves the listener it inherits
// as fd 3.
func forward(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	to := fs.String("to", "", "address to forward to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return fmt.Errorf("forward: the listener on fd 3: %w", err)
	}
	return cluster.Forward(ctx, ln, *to)
}
