// Package testutil runs mcpgate's real binaries for integration tests and
// makes sure every process a test starts is gone when it ends.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHooksTag is the build tag that gives mcpgated its test hooks.
const TestHooksTag = "mcpgate_testhooks"

// Binaries are the programs under test, built once per test binary.
type Binaries struct {
	Daemon string // mcpgated
	Ctl    string // mcpgatectl
	Fake   string // the fake MCP server
	Dir    string // the directory holding them
}

// build is one set of binaries, made at most once per test binary.
type build struct {
	once sync.Once
	bins Binaries
	err  error
}

// builds holds the binaries with the race detector ([1]) and without ([0]).
var builds [2]build

// Build compiles mcpgated, mcpgatectl and the fake server into a directory
// shared by the tests of this binary, with the race detector when the tests
// run with it, and with the test hooks of mcpgated (build tag
// mcpgate_testhooks: SIGUSR2 wedges the main loop, SIGUSR1 reports the
// footprint), which production builds do not carry. The directory is
// removed by Cleanup in TestMain, or left in the system temp dir otherwise.
func Build(t testing.TB) Binaries {
	t.Helper()
	return buildOnce(t, raceEnabled)
}

// BuildWithoutRace is Build without the race detector, for load tests
// whose daemon would spend its time in the detector rather than in the
// code under load.
func BuildWithoutRace(t testing.TB) Binaries {
	t.Helper()
	return buildOnce(t, false)
}

func buildOnce(t testing.TB, race bool) Binaries {
	t.Helper()
	b := &builds[0]
	if race {
		b = &builds[1]
	}
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpgate-bin-")
		if err != nil {
			b.err = err
			return
		}
		args := []string{"build", "-tags", TestHooksTag, "-o", dir + "/"}
		if race {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/mcpgated", "./cmd/mcpgatectl", "./internal/testing/fakeserver")
		cmd := exec.Command("go", args...)
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		b.bins = Binaries{Daemon: dir + "/mcpgated", Ctl: dir + "/mcpgatectl", Fake: dir + "/fakeserver", Dir: dir}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bins
}

// Main runs a package's tests and then removes the binaries Build made:
// func TestMain(m *testing.M) { testutil.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

// RemoveBinaries deletes what Build made; Main calls it.
func RemoveBinaries() {
	for i := range builds {
		if dir := builds[i].bins.Dir; dir != "" {
			os.RemoveAll(dir)
		}
	}
}

// ModuleRoot returns the repository root.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Env returns the environment for processes under test: the test's own
// minus systemd's variables, with the race detector's exit delay off.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "DBUS_SYSTEM_BUS_ADDRESS":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "GORACE=atexit_sleep_ms=0"), extra...)
}

// WriteConfigFiles writes files (path relative to a new temporary
// directory → content) and returns the path of its mcpgate.toml, the main
// configuration file beside its conf.d.
func WriteConfigFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "mcpgate.toml")
}

// FreePort returns a TCP port on 127.0.0.1 for a daemon under test to
// listen on, free now and kept from every other test of this host until t
// ends. A port the kernel hands out for port 0 can be handed again, to an
// outgoing connection or another test's listener, between the pick and the
// daemon's bind; so the port comes from below the kernel's ephemeral range,
// where it assigns none, and is reserved across test processes by holding
// an abstract unix socket named after it.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := reservablePorts()
	span := hi - lo
	start := int(time.Now().UnixNano()/1000+int64(os.Getpid())*7919) % span
	for i := range span {
		port := lo + (start+i)%span
		hold, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("@mcpgate-test-port-%d", port), Net: "unix"})
		if err != nil {
			continue // another test holds it
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			hold.Close() // something else listens there
			continue
		}
		l.Close()
		t.Cleanup(func() { hold.Close() })
		return port
	}
	t.Fatalf("no free port in %d-%d", lo, hi)
	return 0
}

// reservablePorts returns the range FreePort picks from: the ports from
// 10000 up to the kernel's ephemeral range (ip_local_port_range), or to
// 32768 when that cannot be read or leaves too little room.
func reservablePorts() (lo, hi int) {
	lo, hi = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if first, err := strconv.Atoi(f[0]); err == nil && first > lo+1000 {
			hi = first
		}
	}
	return lo, hi
}

// Buffer is a bytes.Buffer safe for a process writing while a test reads.
type Buffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	wake chan struct{} // closed by the next Write; nil when nobody awaits
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	return b.buf.Write(p)
}

// Await waits until everything written so far satisfies match, and fails
// the test after timeout.
func (b *Buffer) Await(t testing.TB, timeout time.Duration, what string, match func(written string) bool) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if match(b.buf.String()) {
			b.mu.Unlock()
			return
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			t.Fatalf("timed out after %s waiting for %s in:\n%s", timeout, what, b.String())
		}
	}
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start starts cmd in its own process group and registers a cleanup that
// kills it and every descendant by PID, then reaps it. Use it for every
// process a test starts.
func Start(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	StartExit(t, cmd)
}

// StartExit is Start, returning a channel that receives the result of
// cmd.Wait once the process exited, for tests of the exit status.
func StartExit(t testing.TB, cmd *exec.Cmd) <-chan error {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	waited := make(chan struct{})
	exit := make(chan error, 1)
	go func() {
		exit <- cmd.Wait()
		close(waited)
	}()
	t.Cleanup(func() {
		KillTree(pid)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Errorf("process %d (%s) was not reaped", pid, cmd.Path)
		}
	})
	return exit
}

// KillTree SIGKILLs pid, its process group, and every descendant and their
// process groups, found through /proc before anything is killed. pid dies
// first, as a whole host would: a daemon must not see its children die and
// answer for them.
func KillTree(pid int) {
	pids := append(Descendants(pid), pid)
	groups := map[int]bool{}
	for _, p := range pids {
		if pg, err := syscall.Getpgid(p); err == nil && pg > 1 {
			groups[pg] = true
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for pg := range groups {
		syscall.Kill(-pg, syscall.SIGKILL)
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// Descendants returns the PIDs of every living descendant of pid.
func Descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := PPID(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// PPID returns the parent of pid, or 0 if it is gone.
func PPID(pid int) int {
	f := procStat(pid)
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// State returns the one-letter state of pid ("S", "Z", …), or "" if gone.
func State(pid int) string {
	f := procStat(pid)
	if len(f) < 1 {
		return ""
	}
	return f[0]
}

// procStat returns the fields of /proc/PID/stat after the command name.
func procStat(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}

// GroupAlive reports whether any process is left in process group pgid.
func GroupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}

// Eventually polls cond until it holds or the deadline passes. Use it only
// for state that has no event to wait for, such as the process table.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, 10*time.Millisecond, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Poll checks cond every interval until it holds or timeout passes, and
// reports whether it held: Eventually for a caller that explains a failure
// itself, or whose check is costly.
func Poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// Context returns a context that ends with the test, or after timeout.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
