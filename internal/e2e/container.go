// Package e2e boots a Debian root under systemd-nspawn so that tests can drive mcpgate under a real systemd.
//
// The root comes from packaging/e2e/mkroot.sh (built once, then cached). Each
// Boot starts a fresh container on it with its own network namespace, so a
// gateway on the host's 127.0.0.1:7431 never meets the one under test, and
// t.Cleanup stops the container and kills every process in it, whatever
// failed.
//
// What this needs from the host, and why (found on a Firecracker VM whose PID 1
// is not systemd, with hybrid cgroups: v1 controllers, name=systemd at
// /sys/fs/cgroup/systemd, cgroup2 at /sys/fs/cgroup/unified):
//
//   - --register=no: there is no systemd-machined and no system bus, so
//     registration fails ("Failed to open system bus"). For the same reason
//     `systemd-run --machine=`/`machinectl` cannot reach the container ("System
//     has not been booted with systemd as init system"); commands run through
//     nsenter on the container's init PID instead (see Command).
//   - --keep-unit: otherwise nspawn asks PID 1 over D-Bus for a scope. With it,
//     nspawn creates payload/ and supervisor/ cgroups inside its own cgroup,
//     which here is the root: two containers would share them. So nspawn is
//     started in a cgroup of its own, <hierarchy>/mcpgate-e2e/<name>, in every
//     hierarchy it uses (name=systemd and cgroup2), via a tiny sh wrapper that
//     moves itself there before exec'ing nspawn.
//   - SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1: on a hybrid host nspawn would give the
//     container a hybrid layout with read-only v1 controllers. With it, the
//     container's systemd sees a pure cgroup2 /sys/fs/cgroup, like a stock
//     Debian 12 host; it boots clean (hybrid mode logs "Failed to create
//     symlink /sys/fs/cgroup/cpu"). The cgroup2 hierarchy has no controllers
//     here, so CPU/memory/task limits are not enforced inside; process
//     tracking, KillMode= and cgroup-empty detection work.
//   - SYSTEMD_NSPAWN_USE_CGNS stays at its default (a cgroup namespace): fine.
//   - --volatile=overlay: the cached root is mounted read-only under a tmpfs
//     overlay, so there is nothing to copy (boot is about a second) and the
//     cache stays pristine. Files go in through the container (WriteFile).
//   - --notify-ready=yes with NOTIFY_SOCKET pointing at a socket of ours:
//     nspawn reports X_NSPAWN_LEADER_PID=<init pid> at once and READY=1 when
//     the container's systemd has finished starting up, so boot is awaited,
//     not polled.
//   - Killing systemd-nspawn does not stop the container (its init is
//     re-parented and keeps running), so teardown kills the init PID too, then
//     every PID left in the container's cgroups.
//   - /run here is not a tmpfs, so nspawn says "Attempted to remove disk file
//     system under /run/systemd/nspawn/propagate/NAME" at exit; harmless.
//
// On a host whose PID 1 is systemd the cgroup wrapper and --keep-unit are left
// out and nspawn gets a scope from systemd as usual (not exercised here).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

const (
	// EnvEnable must be "1" for the end-to-end tests to run; `make e2e` sets it.
	EnvEnable = "MCPGATE_E2E"
	// EnvCache overrides the cache directory of packaging/e2e/mkroot.sh
	// (default /var/cache/mcpgate-test).
	EnvCache = "MCPGATE_E2E_CACHE"
	// EnvRelease names the Debian release whose root the tests boot, one
	// of Releases; empty means the first. `make e2e` runs the suite once
	// for each.
	EnvRelease = "MCPGATE_E2E_RELEASE"

	// DefaultBootTimeout bounds a boot when Config.BootTimeout is zero.
	DefaultBootTimeout = 2 * time.Minute
	// DefaultCommandTimeout bounds each Run, RunInput, WriteFile and CopyFile.
	DefaultCommandTimeout = 2 * time.Minute

	// stopTimeout is how long a clean poweroff may take before teardown
	// kills; a unit that ignores SIGTERM holds the poweroff up to its
	// TimeoutStopSec=.
	stopTimeout = 20 * time.Second
	// cgroupGroup is the cgroup directory, in each hierarchy, that holds one
	// directory per container.
	cgroupGroup = "mcpgate-e2e"
	// containerPath is PATH for commands run in the container.
	containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Require skips the test unless end-to-end tests are enabled (MCPGATE_E2E=1)
// and we are root, and fails it if a tool the harness needs is missing.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvEnable) != "1" {
		t.Skipf("end-to-end test: set %s=1 (`make e2e` does) to boot a systemd container", EnvEnable)
	}
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "end-to-end test: needs root (systemd-nspawn, nsenter, cgroups)")
	}
	for _, tool := range []string{"systemd-nspawn", "nsenter", "debootstrap", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("end-to-end test: %s not found: %v; install it with apt-get install systemd-container debootstrap util-linux", tool, err)
		}
	}
}

// Releases are the Debian releases the end-to-end tests run on, oldest
// first: 12 "bookworm" (oldstable) and 13 "trixie" (stable).
var Releases = []string{"bookworm", "trixie"}

// Release returns the Debian release this run boots: $MCPGATE_E2E_RELEASE,
// or the first of Releases. An unknown name fails the test.
func Release(t testing.TB) string {
	t.Helper()
	r := os.Getenv(EnvRelease)
	if r == "" {
		return Releases[0]
	}
	if !slices.Contains(Releases, r) {
		t.Fatalf("$%s=%q: the end-to-end tests run on %s", EnvRelease, r, strings.Join(Releases, " and "))
	}
	return r
}

// OnlyOn skips the test unless this run boots one of releases, saying why
// the others need not run it.
func OnlyOn(t testing.TB, why string, releases ...string) {
	t.Helper()
	if r := Release(t); !slices.Contains(releases, r) {
		t.Skipf("runs on %s only, not on %s: %s", strings.Join(releases, " and "), r, why)
	}
}

// Root is a root file system prepared by packaging/e2e/mkroot.sh.
type Root struct {
	// Release is the Debian release, one of Releases.
	Release string
	// Dir is the root directory, e.g. /var/cache/mcpgate-test/bookworm-root.
	Dir string
	// Cached is true when mkroot.sh reused the cached root and false when it
	// built it during this call.
	Cached bool
	// Elapsed is how long mkroot.sh took.
	Elapsed time.Duration
}

// PrepareRoot runs packaging/e2e/mkroot.sh for the run's release (Release),
// which builds the root unless its cache is current, and then holds a
// shared lock on that root until the test ends so that no rebuild replaces
// it under a running container. mkroot.sh's progress lines go to the test
// log.
func PrepareRoot(t testing.TB) Root {
	t.Helper()
	release := Release(t)
	script, err := findMkroot()
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv(EnvCache)
	if cache == "" {
		cache = testutil.CacheDir()
	}
	stamp := filepath.Join(cache, release+"-root.stamp")
	before, _ := os.Stat(stamp)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "--suite="+release)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &lineLogger{t: t}
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s --suite=%s: %v (its log is above; the build log is %s)", script, release, err, filepath.Join(cache, release+"-build.log"))
	}
	root := Root{Release: release, Dir: strings.TrimSpace(stdout.String()), Elapsed: time.Since(start)}
	after, err := os.Stat(stamp)
	if err != nil {
		t.Fatalf("%s succeeded but left no stamp: %v", script, err)
	}
	root.Cached = before != nil && before.ModTime().Equal(after.ModTime())
	if _, err := os.Stat(filepath.Join(root.Dir, "etc/os-release")); err != nil {
		t.Fatalf("%s printed %q, which is not a root file system: %v", script, root.Dir, err)
	}

	lock, err := os.OpenFile(filepath.Join(cache, release+"-root.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("locking the root cache: %v", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
		lock.Close()
		t.Fatalf("locking the root cache %s: %v", lock.Name(), err)
	}
	t.Cleanup(func() { lock.Close() }) // closing releases the lock
	return root
}

// findMkroot finds packaging/e2e/mkroot.sh in the module that contains the
// working directory (go test runs in the package directory).
func findMkroot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding mkroot.sh: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "packaging", "e2e", "mkroot.sh"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding mkroot.sh: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Config says what to boot and how.
type Config struct {
	// Root is the directory to boot, usually PrepareRoot(t).Dir. It is
	// mounted read-only under a tmpfs overlay, so it stays unchanged.
	Root string
	// BootTimeout bounds the boot up to `systemctl is-system-running`
	// answering; zero means DefaultBootTimeout.
	BootTimeout time.Duration
	// NspawnArgs are extra systemd-nspawn arguments, such as
	// "--bind-ro=/work/main/dist:/mnt/dist".
	NspawnArgs []string
}

// Container is a booted container. Its methods may be called from several
// goroutines.
type Container struct {
	name      string
	initPID   int
	init      *os.Process // a pidfd-backed handle: no PID reuse races
	nspawn    *exec.Cmd
	exited    chan struct{} // closed once nspawn has been reaped
	waitErr   error         // nspawn's exit, valid after exited is closed
	bootLog   string
	cgroups   []string // this container's cgroup directories, one per hierarchy
	transport *http.Transport
	nsenter   string

	stopOnce sync.Once
	stopErr  error
}

// Boot starts a container on cfg.Root with `systemd-nspawn --boot` and returns
// once its systemd reports the system running (or degraded, which is logged
// with the failed units). The container is stopped, and every process in it
// killed, in t.Cleanup; on failure the end of its journal is logged first.
func Boot(t testing.TB, cfg Config) *Container {
	t.Helper()
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = DefaultBootTimeout
	}
	start := time.Now()
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Fatalf("nsenter: %v", err)
	}
	c := &Container{
		name:    "mcpgate-e2e-" + randomHex(4),
		exited:  make(chan struct{}),
		nsenter: nsenter,
	}
	dir := t.TempDir()
	c.bootLog = filepath.Join(dir, "boot.log")

	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatalf("boot %s: notify socket: %v", c.name, err)
	}
	events := watchNotify(notify)

	systemdHost := isSystemdBooted()
	args := []string{
		"--boot",
		"--directory=" + cfg.Root,
		"--machine=" + c.name,
		"--uuid=" + randomHex(16), // the container's transient machine-id
		"--volatile=overlay",
		"--private-network",
		"--register=no",
		"--notify-ready=yes",
		"--console=read-only", // the console (boot messages) goes to boot.log
		"--link-journal=no",
		"--resolv-conf=off",
		"--timezone=off",
	}
	if !systemdHost {
		args = append(args, "--keep-unit")
	}
	args = append(args, cfg.NspawnArgs...)

	var argv []string
	if systemdHost {
		argv = append([]string{"systemd-nspawn"}, args...)
	} else {
		for _, stale := range sweepStaleCgroups() {
			t.Logf("removed the empty cgroup %s that a crashed run left behind", stale)
		}
		if c.cgroups, err = makeCgroups(c.name); err != nil {
			notify.Close()
			t.Fatalf("boot %s: %v", c.name, err)
		}
		// Move the shell into the container's cgroups, then become nspawn.
		const enter = `while [ "$1" != -- ]; do echo $$ >"$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"`
		argv = append([]string{"/bin/sh", "-c", enter, "sh"}, c.cgroups...)
		argv = append(append(argv, "--", "systemd-nspawn"), args...)
	}

	logFile, err := os.Create(c.bootLog)
	if err != nil {
		notify.Close()
		removeCgroups(c.cgroups)
		t.Fatalf("boot %s: %v", c.name, err)
	}
	c.nspawn = exec.Command(argv[0], argv[1:]...)
	c.nspawn.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"NOTIFY_SOCKET=" + notify.LocalAddr().String(),
		"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1",
	}
	c.nspawn.Stdout = logFile
	c.nspawn.Stderr = logFile
	// If the test binary dies (say, go test -timeout), nspawn powers the
	// container off. SIGTERM, not SIGKILL: a killed nspawn leaves its
	// container running. Pdeathsig fires when the forking thread exits, so
	// nspawn is started from a goroutine that keeps its thread locked and
	// alive until nspawn is reaped. Its own process group keeps a terminal's
	// ^C away from it: the test binary dies of it, and Pdeathsig follows.
	c.nspawn.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	started := make(chan error, 1)
	go c.runNspawn(started, logFile)
	if err := <-started; err != nil {
		notify.Close()
		removeCgroups(c.cgroups)
		t.Fatalf("boot %s: starting systemd-nspawn: %v", c.name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logDiagnostics(t)
		}
		stopStart := time.Now()
		if err := c.Stop(); err != nil {
			t.Errorf("stopping container %s: %v", c.name, err)
		}
		notify.Close()
		took := time.Since(stopStart)
		t.Logf("stopped container %s in %v", c.name, took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Logf("slow shutdown; end of the console log:\n%s", tailFile(c.bootLog, 30))
		}
	})

	deadline := time.NewTimer(cfg.BootTimeout)
	defer deadline.Stop()
	ready := events.ready
	for c.initPID == 0 || ready != nil {
		select {
		case pid := <-events.leader:
			c.initPID = pid
		case <-ready:
			ready = nil
		case <-c.exited:
			t.Fatalf("boot %s: systemd-nspawn exited during boot (%v); end of %s:\n%s", c.name, c.waitErr, c.bootLog, tailFile(c.bootLog, 40))
		case <-deadline.C:
			t.Fatalf("boot %s: not ready after %v (init PID %d); end of %s:\n%s", c.name, cfg.BootTimeout, c.initPID, c.bootLog, tailFile(c.bootLog, 40))
		}
	}
	if c.init, err = os.FindProcess(c.initPID); err != nil {
		t.Fatalf("boot %s: init PID %d: %v", c.name, c.initPID, err)
	}
	c.transport = &http.Transport{DialContext: c.DialContext}
	readyAfter := time.Since(start)

	ctx, cancel := context.WithTimeout(t.Context(), max(cfg.BootTimeout-readyAfter, 10*time.Second))
	defer cancel()
	// --wait blocks until start-up has finished; the exit status is non-zero
	// for anything but "running", so read the answer, not the status.
	res, err := c.Exec(ctx, nil, "systemctl", "is-system-running", "--wait")
	state := strings.TrimSpace(res.Stdout)
	switch state {
	case "running":
	case "degraded":
		failed, _ := c.Exec(ctx, nil, "systemctl", "--failed", "--no-legend", "--plain")
		t.Logf("container %s is degraded; failed units:\n%s", c.name, failed.Stdout)
	default:
		t.Fatalf("boot %s: systemctl is-system-running says %q (%v)", c.name, state, err)
	}
	t.Logf("booted container %s (init PID %d) in %v: READY=1 after %v, system %s; console log %s",
		c.name, c.initPID, time.Since(start).Round(time.Millisecond), readyAfter.Round(time.Millisecond), state, c.bootLog)
	return c
}

// runNspawn starts and reaps nspawn on a locked OS thread (see Pdeathsig).
func (c *Container) runNspawn(started chan<- error, logFile *os.File) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(c.exited)
	defer logFile.Close()
	if err := c.nspawn.Start(); err != nil {
		c.waitErr = err
		started <- err
		return
	}
	started <- nil
	c.waitErr = c.nspawn.Wait()
}

// Name returns the container's machine name (also its nspawn --machine=).
func (c *Container) Name() string { return c.name }

// InitPID returns the host PID of the container's systemd.
func (c *Container) InitPID() int { return c.initPID }

// BootLog returns the file that holds the container's console output.
func (c *Container) BootLog() string { return c.bootLog }

// Path returns the host path under which the container's file name is
// visible: /proc/<init PID>/root/<name>. Use it to read files or to dial
// unix sockets in the container from the test. An absolute symbolic link on
// the way resolves on the host, not in the container; use Run("cat", …) when
// that matters.
func (c *Container) Path(name string) string {
	return filepath.Join("/proc", strconv.Itoa(c.initPID), "root", name)
}

// Stop powers the container off (SIGTERM to nspawn, which asks the
// container's systemd to shut down), kills the container's init and nspawn if
// that takes longer than 20s, kills every PID still left in the container's
// cgroups, and removes those cgroups. It is idempotent; Boot's cleanup calls
// it, and a test may call it earlier.
func (c *Container) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Container) stop() error {
	var errs []error
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
	select {
	case <-c.exited:
	default:
		if err := c.nspawn.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("SIGTERM to systemd-nspawn (PID %d): %w", c.nspawn.Process.Pid, err))
		}
		select {
		case <-c.exited:
		case <-time.After(stopTimeout):
			errs = append(errs, fmt.Errorf("container did not power off within %v; killed it", stopTimeout))
			// Kill the init, whose death takes the whole PID namespace along,
			// and let nspawn reap it and exit: killing nspawn at once would
			// leave the init's zombie to the host's init.
			if c.init != nil {
				_ = c.init.Kill()
			}
			select {
			case <-c.exited:
			case <-time.After(5 * time.Second):
				_ = c.nspawn.Process.Kill()
				select {
				case <-c.exited:
				case <-time.After(stopTimeout):
					errs = append(errs, fmt.Errorf("systemd-nspawn (PID %d) did not exit after SIGKILL", c.nspawn.Process.Pid))
				}
			}
		}
	}
	if c.init != nil {
		// Only if nspawn died before its container (a killed nspawn leaves
		// the container running) is the init still alive here.
		if c.init.Signal(syscall.Signal(0)) == nil && alive(c.initPID) {
			_ = c.init.Kill()
			errs = append(errs, fmt.Errorf("the container's init (PID %d) outlived systemd-nspawn; killed it", c.initPID))
		}
		c.init.Release()
	}
	if err := killCgroupProcs(c.cgroups, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(c.cgroups); err != nil {
		errs = append(errs, err)
	}
	_ = os.Remove(filepath.Join("/run/systemd/nspawn/propagate", c.name))
	return errors.Join(errs...)
}

// logDiagnostics logs what helps to understand a failed test: the failed
// units and the end of the journal, or the console log if the container is
// gone. It runs from t.Cleanup, after t.Context() is done.
func (c *Container) logDiagnostics(t testing.TB) {
	select {
	case <-c.exited:
		t.Logf("container %s exited (%v); end of its console log %s:\n%s", c.name, c.waitErr, c.bootLog, tailFile(c.bootLog, 40))
		return
	default:
	}
	if c.initPID == 0 {
		t.Logf("container %s never reported its init; end of its console log %s:\n%s", c.name, c.bootLog, tailFile(c.bootLog, 40))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	failed, _ := c.Exec(ctx, nil, "systemctl", "--failed", "--no-legend", "--plain")
	journal, _ := c.Exec(ctx, nil, "journalctl", "--boot", "--no-pager", "--lines=60", "--output=short-monotonic")
	t.Logf("container %s: failed units:\n%s\nend of its journal:\n%s", c.name, failed.Stdout, journal.Stdout)
}

// Result is what a command in the container did.
type Result struct {
	Stdout, Stderr string
	// ExitCode is the exit status, or -1 if the command did not exit
	// normally (killed, or never started).
	ExitCode int
	Elapsed  time.Duration
}

// Command returns a command that runs args in the container: nsenter enters
// every namespace of the container's init (mount, PID, network, IPC, UTS,
// cgroup), as root, with a clean environment (PATH, HOME=/root, LANG). The
// process is not part of any unit of the container's systemd; use RunUnit for
// that. The caller starts and waits for it; when ctx is done, the process in
// the container and nsenter are killed by PID. It dies with the container.
func (c *Container) Command(ctx context.Context, args ...string) *exec.Cmd {
	nsargs := append([]string{"--target=" + strconv.Itoa(c.initPID), "--all", "--"}, args...)
	cmd := exec.CommandContext(ctx, c.nsenter, nsargs...)
	cmd.Env = []string{
		"PATH=" + containerPath,
		"HOME=/root",
		"LANG=C.UTF-8",
		"TERM=dumb",
		"PAGER=cat",
		"SYSTEMD_PAGER=cat",
		"SYSTEMD_COLORS=0",
	}
	// nsenter forks the command into the container's PID namespace and does
	// not forward signals, so cancelling kills the command in the container
	// and lets nsenter reap it and exit. Killing nsenter too would orphan the
	// dying command to the host's init; until that reaps it, the container's
	// systemd-shutdown sees it and waits 10s for it at poweroff. WaitDelay
	// kills nsenter if it lingers.
	cmd.Cancel = func() error {
		if killDescendants(cmd.Process.Pid) == 0 {
			return cmd.Process.Kill() // it has not forked yet
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Exec runs args in the container (see Command) with stdin (nil for none)
// and returns what it printed. The error is non-nil if it could not run or
// exited non-zero; it names the command and carries its stderr.
func (c *Container) Exec(ctx context.Context, stdin io.Reader, args ...string) (Result, error) {
	cmd := c.Command(ctx, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	res := Result{
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		ExitCode: cmd.ProcessState.ExitCode(),
		Elapsed:  time.Since(start),
	}
	if err != nil {
		return res, fmt.Errorf("in container: %s: %w (stderr: %s)", shellQuote(args), err, strings.TrimSpace(res.Stderr))
	}
	return res, nil
}

// Run runs args in the container (see Command), fails the test if that does
// not succeed within DefaultCommandTimeout, and returns its standard output
// with surrounding white space trimmed. Do not call it from t.Cleanup (the
// test's context is done by then); use Exec.
func (c *Container) Run(t testing.TB, args ...string) string {
	t.Helper()
	return c.RunInput(t, "", args...)
}

// RunInput is Run with stdin as the command's standard input.
func (c *Container) RunInput(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), DefaultCommandTimeout)
	defer cancel()
	res, err := c.Exec(ctx, strings.NewReader(stdin), args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(res.Stdout)
}

// WriteFile writes data to the file name in the container, owned by root
// with mode perm, creating parent directories. The file is replaced
// atomically (written beside it, then renamed).
func (c *Container) WriteFile(t testing.TB, name string, data []byte, perm fs.FileMode) {
	t.Helper()
	if !filepath.IsAbs(name) {
		t.Fatalf("WriteFile: %q is not an absolute path", name)
	}
	const write = `set -e; mkdir -p -- "$(dirname -- "$1")"; cat >"$1.e2e-new"; chmod "$2" "$1.e2e-new"; mv -f -- "$1.e2e-new" "$1"`
	ctx, cancel := context.WithTimeout(t.Context(), DefaultCommandTimeout)
	defer cancel()
	if _, err := c.Exec(ctx, bytes.NewReader(data), "/bin/sh", "-c", write, "sh", name, fmt.Sprintf("%o", perm.Perm())); err != nil {
		t.Fatalf("writing %s in container %s: %v", name, c.name, err)
	}
}

// CopyFile copies the host file hostPath to name in the container (see
// WriteFile).
func (c *Container) CopyFile(t testing.TB, hostPath, name string, perm fs.FileMode) {
	t.Helper()
	data, err := os.ReadFile(hostPath)
	if err != nil {
		t.Fatalf("copying into container %s: %v", c.name, err)
	}
	c.WriteFile(t, name, data, perm)
}

// HTTPClient returns a client whose connections are made inside the
// container's network namespace (see DialContext): http://127.0.0.1:7431/
// is the container's port 7431, not the host's.
func (c *Container) HTTPClient() *http.Client {
	return &http.Client{Transport: c.transport}
}

// notifyEvents are what nspawn reports on its NOTIFY_SOCKET.
type notifyEvents struct {
	leader chan int      // X_NSPAWN_LEADER_PID, once
	ready  chan struct{} // closed on READY=1
}

// watchNotify reads nspawn's sd_notify messages until conn is closed.
func watchNotify(conn *net.UnixConn) notifyEvents {
	ev := notifyEvents{leader: make(chan int, 1), ready: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		var readyOnce sync.Once
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			for line := range strings.SplitSeq(string(buf[:n]), "\n") {
				key, value, _ := strings.Cut(line, "=")
				switch key {
				case "X_NSPAWN_LEADER_PID":
					if pid, err := strconv.Atoi(value); err == nil && pid > 0 {
						select {
						case ev.leader <- pid:
						default:
						}
					}
				case "READY":
					if value == "1" {
						readyOnce.Do(func() { close(ev.ready) })
					}
				}
			}
		}
	}()
	return ev
}

// isSystemdBooted reports whether the host's PID 1 is systemd, as
// sd_booted(3) does.
func isSystemdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// cgroupHierarchies returns the mounted hierarchies that track processes:
// /sys/fs/cgroup on a unified host; name=systemd and the cgroup2 mount on a
// hybrid one; name=systemd on a legacy one.
func cgroupHierarchies() ([]string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return []string{"/sys/fs/cgroup"}, nil
	}
	var dirs []string
	for _, d := range []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"} {
		if unix.Statfs(d, &st) == nil && (st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return nil, errors.New("cgroups: neither a cgroup2 nor a name=systemd hierarchy is mounted under /sys/fs/cgroup")
	}
	return dirs, nil
}

// makeCgroups creates <hierarchy>/mcpgate-e2e/<name> in every hierarchy.
func makeCgroups(name string) ([]string, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, h := range hierarchies {
		d := filepath.Join(h, cgroupGroup, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			removeCgroups(dirs)
			return nil, fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}

// sweepStaleCgroups removes the cgroup trees of containers whose test died
// without cleaning up (go test -timeout, SIGKILL), once they are empty. A
// tree younger than a minute may belong to a Boot that has not yet moved
// nspawn into it, so it stays. It returns what it removed.
func sweepStaleCgroups() []string {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return nil
	}
	var removed []string
	for _, h := range hierarchies {
		entries, _ := os.ReadDir(filepath.Join(h, cgroupGroup))
		for _, e := range entries {
			dir := filepath.Join(h, cgroupGroup, e.Name())
			info, err := e.Info()
			if !e.IsDir() || err != nil || time.Since(info.ModTime()) < time.Minute || len(cgroupPIDs([]string{dir})) > 0 {
				continue
			}
			if removeCgroups([]string{dir}) == nil {
				removed = append(removed, dir)
			}
		}
	}
	return removed
}

// killCgroupProcs SIGKILLs, by PID, every process in the cgroup trees dirs
// and awaits each one's exit, until the trees are empty or timeout passes.
func killCgroupProcs(dirs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := cgroupPIDs(dirs)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in cgroups %v after SIGKILL", pids, dirs)
		}
		for _, pid := range pids {
			killAndAwait(pid, time.Until(deadline))
		}
	}
}

// killAndAwait SIGKILLs pid through a pidfd (so a recycled PID is never hit)
// and waits up to timeout for it to exit (the pidfd turns readable).
func killAndAwait(pid int, timeout time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, int(max(timeout, time.Millisecond)/time.Millisecond))
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// cgroupPIDs lists the processes in the cgroup trees dirs.
func cgroupPIDs(dirs []string) []int {
	var pids []int
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for f := range strings.FieldsSeq(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the cgroup trees dirs, deepest first, and then the
// shared parent if nothing else uses it.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		var sub []string
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				sub = append(sub, path)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			if err := unix.Rmdir(sub[i]); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", sub[i], err))
			}
		}
		_ = unix.Rmdir(filepath.Dir(d)) // fails while another container uses it
	}
	return errors.Join(errs...)
}

// killDescendants SIGKILLs, by PID, every descendant of pid and returns how
// many it found.
func killDescendants(pid int) int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentPID(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	n := 0
	var kill func(int)
	kill = func(p int) {
		for _, child := range children[p] {
			_ = unix.Kill(child, unix.SIGKILL)
			n++
			kill(child)
		}
	}
	kill(pid)
	return n
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && len(data) > i+2 && data[i+2] != 'Z' && data[i+2] != 'X'
}

// parentPID reads the parent of pid from /proc/<pid>/stat.
func parentPID(pid int) (int, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// lineLogger writes each line to the test log.
type lineLogger struct {
	t   testing.TB
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

// tailFile returns the last n lines of the file name.
func tailFile(name string, n int) string {
	f, err := os.Open(name)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// shellQuote renders args for messages.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}
