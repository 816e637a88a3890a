package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The attacker in a process of its own. In one process with the
// victims and the application, an attacker writing about 100,000 frames
// a second also lends the victims its goroutine scheduling and its
// garbage collection, and the victims' tail then measures the tool as
// much as the proxy. `weftbench attack` therefore starts each attack
// phase as `weftbench attack-client`, a child that reads the round's
// addresses and certificates from the work directory, attacks until its
// window ends (or it is sent SIGTERM) and prints what it did on stdout.
// With -attacker-cpus the child runs under taskset on those CPUs; run
// the parent under taskset on the others (bench/attack.sh --pin) and the
// attacker's own CPU is taken out of the victims' budget, as an attacker
// on another machine would be.

// attackEnvFile is where the parent writes what the child needs.
const attackEnvFile = "attack-env.json"

// attackEnvState is the part of attackEnv a child attacker needs: the
// proxies' ports and where the PKI is.
type attackEnvState struct {
	Dir         string `json:"dir"`
	AppHTTP     int    `json:"appHTTP"`
	SIn         int    `json:"sIn"`
	SAdmin      int    `json:"sAdmin"`
	STap        int    `json:"sTap"`
	CH1         int    `json:"cH1"`
	CAdmin      int    `json:"cAdmin"`
	AttackerSrc string `json:"attackerSource"`
}

// saveState writes the child's view of e into e.dir.
func (e *attackEnv) saveState() error {
	st := attackEnvState{Dir: e.dir, AppHTTP: e.appHTTP, SIn: e.sIn, SAdmin: e.sAdmin, STap: e.sTap,
		CH1: e.cH1, CAdmin: e.cAdmin, AttackerSrc: e.attackerSrc.String()}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.dir, attackEnvFile), b, 0o600)
}

// loadAttackEnv is a child's attackEnv, read back from dir: no
// application of its own (the parent serves it) and remote set, so
// attacks do not read the parent's counters.
func loadAttackEnv(dir string) (*attackEnv, error) {
	b, err := os.ReadFile(filepath.Join(dir, attackEnvFile))
	if err != nil {
		return nil, err
	}
	var st attackEnvState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", attackEnvFile, err)
	}
	src := net.ParseIP(st.AttackerSrc)
	if src == nil || !src.IsLoopback() {
		return nil, fmt.Errorf("%s: attacker source %q is not a loopback address", attackEnvFile, st.AttackerSrc)
	}
	e := &attackEnv{dir: st.Dir, certs: map[string]tls.Certificate{}, attackerSrc: src, remote: true,
		appHTTP: st.AppHTTP, sIn: st.SIn, sAdmin: st.SAdmin, sTap: st.STap, cH1: st.CH1, cAdmin: st.CAdmin,
		stopApp: func() {}}
	pkiDir := filepath.Join(st.Dir, "pki")
	rootsPEM, err := os.ReadFile(filepath.Join(pkiDir, "roots.pem"))
	if err != nil {
		return nil, err
	}
	e.roots = x509.NewCertPool()
	if !e.roots.AppendCertsFromPEM(rootsPEM) {
		return nil, errors.New("roots.pem holds no certificate")
	}
	for _, f := range []string{"attacker", "tapper", "client"} {
		c, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, f+".crt"), filepath.Join(pkiDir, f+".key"))
		if err != nil {
			return nil, err
		}
		e.certs[f] = c
	}
	return e, nil
}

// runAttackClientCmd is `weftbench attack-client`: one attack phase, run
// by `weftbench attack` in a child process.
func runAttackClientCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("attack-client", flag.ContinueOnError)
	dir := fs.String("env", "", "work directory of the parent `weftbench attack` (holds "+attackEnvFile+" and pki/)")
	name := fs.String("attack", "", "the attack to run")
	window := fs.Duration("window", 0, "the attack phase: the lead before the victims start plus their measure")
	maxFrames := fs.Int64("max-frames", 2_500_000, "HTTP/2 frames the attacker may send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *window <= 0 || *window > 10*time.Minute || *maxFrames < 1 {
		return errors.New("attack-client: -env, -attack and -window (up to 10m) are required, -max-frames positive")
	}
	specs, err := pickAttacks(*name)
	if err != nil || len(specs) != 1 || specs[0].run == nil {
		return fmt.Errorf("attack-client: -attack %q: want one measured attack", *name)
	}
	e, err := loadAttackEnv(*dir)
	if err != nil {
		return fmt.Errorf("attack-client: %w", err)
	}
	// The parent ends the phase with SIGTERM once its victims are done;
	// the timeout is the same bound the parent's own context has.
	actx, cancel := context.WithTimeout(ctx, *window+victimTimeout+tapTimeout)
	defer cancel()
	note := specs[0].run(actx, e, attackLimits{maxFrames: *maxFrames, window: *window})
	_, err = fmt.Fprintln(out, note)
	return err
}

// attackInChild runs attack a in a child process until ctx ends (then it
// is sent SIGTERM and given 10 s) and returns what the child printed. The
// parent counts what reached the application, since the application is
// its own.
func (e *attackEnv) attackInChild(ctx context.Context, a attackSpec, window time.Duration, maxFrames int64) string {
	self, err := os.Executable()
	if err != nil {
		return "attacker not started: " + err.Error()
	}
	args := []string{"attack-client", "-env", e.dir, "-attack", a.name, "-window", window.String(),
		"-max-frames", fmt.Sprint(maxFrames)}
	bin := self
	if e.attackerCPUs != "" {
		args = append([]string{"-c", e.attackerCPUs, self}, args...)
		bin = "taskset"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := e.appAttackReqs.Load()
	err = cmd.Run()
	note := strings.TrimSpace(stdout.String())
	if a.countsAppRequests {
		note += fmt.Sprintf(", requests that reached the application %d", e.appAttackReqs.Load()-before)
	}
	if err != nil && ctx.Err() == nil || note == "" {
		note += fmt.Sprintf(" (attacker process: %v; %s)", err, oneLine(stderr.String()))
	}
	return note
}
