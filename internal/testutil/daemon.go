package testutil

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Notify is a unixgram socket that records what a process sends with
// sd_notify, as systemd's NOTIFY_SOCKET would.
type Notify struct {
	Path string
	conn *net.UnixConn

	datagrams Recorder[datagram]
	marks     atomic.Int64 // markers sent by Mark
}

type datagram struct {
	text   string
	sender int // PID of the sender, 0 if unknown
}

// NewNotify listens on a fresh notify socket until the test ends.
func NewNotify(t testing.TB) *Notify {
	t.Helper()
	path := filepath.Join(shortTempDir(t), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	// Like systemd, ask for each sender's credentials: NotifyAccess=main
	// accepts only datagrams from the main PID.
	if rc, err := conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1) })
	}
	n := &Notify{Path: path, conn: conn}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		oob := make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
		for {
			k, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			n.datagrams.Add(datagram{string(buf[:k]), senderPID(oob[:oobn])})
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return n
}

// senderPID returns the PID in an SCM_CREDENTIALS message, or 0.
func senderPID(oob []byte) int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) == 0 {
		return 0
	}
	cred, err := syscall.ParseUnixCredentials(&msgs[0])
	if err != nil {
		return 0
	}
	return int(cred.Pid)
}

// Sender returns the PID of the process that sent datagram i, or 0 if the
// kernel did not say.
func (n *Notify) Sender(i int) int {
	all := n.datagrams.All()
	if i < 0 || i >= len(all) {
		return 0
	}
	return all[i].sender
}

// Mark sends a marker datagram ("MCPGATE_TEST_MARK=N") to the socket and
// returns its index once received. The socket keeps datagrams in order, so
// everything after the index was sent after Mark was called.
func (n *Notify) Mark(t testing.TB) int {
	t.Helper()
	mark := fmt.Sprintf("MCPGATE_TEST_MARK=%d", n.marks.Add(1))
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.Path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(mark)); err != nil {
		t.Fatal(err)
	}
	return n.Await(t, 0, 10*time.Second, mark, Has(mark))
}

// AtMost fails the test if more than n datagrams at index from or later
// that satisfy match arrive within window; it returns after window
// otherwise. Use it to show something stopped, after an event (Mark) that
// orders the datagrams.
func (n *Notify) AtMost(t testing.TB, from int, window time.Duration, limit int, what string, match func(string) bool) {
	t.Helper()
	n.datagrams.Within(window, func(all []datagram) bool {
		var seen []string
		for _, d := range all[min(from, len(all)):] {
			if match(d.text) {
				seen = append(seen, d.text)
			}
		}
		if len(seen) > limit {
			t.Fatalf("%d sd_notify %s arrived, want at most %d: %q", len(seen), what, limit, seen)
		}
		return false // watch the whole window
	})
}

// Messages returns every datagram received so far.
func (n *Notify) Messages() []string {
	return texts(n.datagrams.All())
}

func texts(all []datagram) []string {
	out := make([]string, len(all))
	for i, d := range all {
		out[i] = d.text
	}
	return out
}

// Await waits for a datagram at index from or later that satisfies match
// and returns its index. It fails the test after timeout.
func (n *Notify) Await(t testing.TB, from int, timeout time.Duration, what string, match func(string) bool) int {
	t.Helper()
	var found int
	if !n.datagrams.Within(timeout, Index(from, func(d datagram) bool { return match(d.text) }, &found)) {
		t.Fatalf("timed out after %s waiting for sd_notify %s; got %q", timeout, what, n.Messages())
	}
	return found
}

// AwaitMessages waits until cond holds for every datagram received so far,
// in order, checking again on each arrival; it fails the test after
// timeout. Use it for what depends on several datagrams, such as "the last
// STATUS= is …".
func (n *Notify) AwaitMessages(t testing.TB, timeout time.Duration, what string, cond func(msgs []string) bool) {
	t.Helper()
	if !n.datagrams.Within(timeout, func(all []datagram) bool { return cond(texts(all)) }) {
		t.Fatalf("timed out after %s waiting for sd_notify %s; got %q", timeout, what, n.Messages())
	}
}

// Has returns a match function for a datagram holding the assignment kv,
// e.g. Has("READY=1").
func Has(kv string) func(string) bool {
	return func(msg string) bool {
		for _, line := range strings.Split(msg, "\n") {
			if line == kv {
				return true
			}
		}
		return false
	}
}

// Daemon is a running mcpgated.
type Daemon struct {
	Cmd        *exec.Cmd
	PID        int
	Notify     *Notify
	URL        string // the MCP endpoint on its TCP listener
	ConfigPath string
	Stderr     *Buffer
	exited     chan struct{}
}

// DaemonOptions tune StartDaemon.
type DaemonOptions struct {
	Env        []string // added to the environment
	Args       []string // added to the command line
	NoWait     bool     // do not wait for READY=1
	ReadyAfter time.Duration
	// Activate runs mcpgated under the real systemd-socket-activate with
	// these arguments in front ("-l", "127.0.0.1:PORT", "--fdname=http",
	// …). The daemon's environment (NOTIFY_SOCKET, Env, the watchdog's) is
	// passed with -E. StartDaemon returns once every -l address listens,
	// without waiting for READY=1: the first connection starts the daemon.
	// The test is skipped when systemd-socket-activate is not installed.
	Activate []string
	// Watchdog, if positive, sets WATCHDOG_USEC to it and WATCHDOG_PID to
	// the daemon's PID, as systemd does for WatchdogSec=.
	Watchdog time.Duration
	// WithoutRace runs the daemon built without the race detector
	// (BuildWithoutRace), for load tests.
	WithoutRace bool
	// Stderr, if set, is the daemon's standard error instead of
	// Daemon.Stderr (which then gets only its standard output), e.g. a
	// journal stream from journaldtest's Stream, passed with JOURNAL_STREAM
	// in Env as systemd does.
	Stderr *os.File
	// Cgroup, if set, is the cgroup directory the daemon starts in, as
	// systemd starts a service in a cgroup of its own (see cgrouptest.New).
	Cgroup string
	// Binary, if set, is the mcpgated to run instead of the one Build
	// made (a copy a test replaces, to make it re-execute).
	Binary string
	// ExtraFiles are passed to mcpgated as descriptors 3 and on.
	ExtraFiles []*os.File
	// Wrap, if set, is a command line mcpgated runs under, which must exec
	// it in its own place (so that PID stays the daemon's), for instance
	// "ip netns exec NAME" to run it in a network namespace.
	Wrap []string
}

// Config returns a configuration whose gateway listens on a free port, with
// D-Bus off, plain logs and auth = "none" (tests of access set Auth),
// followed by backends.
func Config(t testing.TB, backends string) (toml string, url string) {
	return ConfigWith(t, backends, ConfigOptions{})
}

// ConfigOptions tune ConfigWith.
type ConfigOptions struct {
	Bus     string // [gateway] bus; "" means "none"
	Auth    string // [gateway] auth; "" means "none"
	Gateway string // more lines for the [gateway] section
}

// ConfigWith is Config with the choices of opts.
func ConfigWith(t testing.TB, backends string, opts ConfigOptions) (toml string, url string) {
	port := FreePort(t)
	url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	bus := cmp.Or(opts.Bus, "none")
	auth := cmp.Or(opts.Auth, "none")
	return fmt.Sprintf("[gateway]\nlisten = [\"127.0.0.1:%d\"]\nbus = %q\nauth = %q\nlog_target = \"stderr\"\nlog_level = \"debug\"\n%s\n%s", port, bus, auth, opts.Gateway, backends), url
}

// SocketConfig is Config with a unix socket listener besides the TCP one:
// socket is its path, in a directory removed when the test ends.
func SocketConfig(t testing.TB, backends string) (toml, url, socket string) {
	socket = filepath.Join(shortTempDir(t), "mcpgate.sock")
	toml, url = Config(t, backends)
	toml = strings.Replace(toml, "listen = [", fmt.Sprintf("listen = [%q, ", "unix:"+socket), 1)
	return toml, url, socket
}

// StartDaemon writes toml to a config file and runs mcpgated on it with a
// notify socket, waiting for READY=1. url is the endpoint the config
// serves. The daemon is stopped and reaped when the test ends.
func StartDaemon(t testing.TB, toml, url string, opts DaemonOptions) *Daemon {
	t.Helper()
	bins := Build(t)
	if opts.WithoutRace {
		bins = BuildWithoutRace(t)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mcpgate.toml")
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	n := NewNotify(t)
	d := &Daemon{Notify: n, URL: url, ConfigPath: cfgPath, Stderr: &Buffer{}, exited: make(chan struct{})}
	argv := append([]string{cmp.Or(opts.Binary, bins.Daemon), "--config", cfgPath}, opts.Args...)
	env := append([]string{"NOTIFY_SOCKET=" + n.Path}, opts.Env...)
	if opts.Watchdog > 0 {
		// systemd names the main process in WATCHDOG_PID; a shell learns
		// its own PID and execs mcpgated in its place.
		env = append(env, fmt.Sprintf("WATCHDOG_USEC=%d", opts.Watchdog.Microseconds()))
		argv = append([]string{"/bin/sh", "-c", `export WATCHDOG_PID=$$; exec "$@"`, "sh"}, argv...)
	}
	argv = append(append([]string{}, opts.Wrap...), argv...)
	listening := 0 // "Listening on" lines systemd-socket-activate will print
	if len(opts.Activate) > 0 {
		tool, err := exec.LookPath("systemd-socket-activate")
		if err != nil {
			Unavailable(t, "systemd-socket-activate not installed: %v", err)
		}
		// It passes only PATH, HOME, TERM, LISTEN_* and what -E names.
		wrapped := append([]string{tool}, opts.Activate...)
		for _, kv := range append(env, "GORACE=atexit_sleep_ms=0") {
			wrapped = append(wrapped, "-E", kv)
		}
		argv = append(wrapped, argv...)
		for _, a := range opts.Activate {
			if a == "-l" || strings.HasPrefix(a, "--listen=") || (strings.HasPrefix(a, "-l") && len(a) > 2) {
				listening++
			}
		}
		env = nil
	}
	d.Cmd = exec.Command(argv[0], argv[1:]...)
	d.Cmd.Env = Env(env...)
	d.Cmd.Stdout = d.Stderr
	d.Cmd.Stderr = d.Stderr
	d.Cmd.ExtraFiles = opts.ExtraFiles
	if opts.Stderr != nil {
		d.Cmd.Stderr = opts.Stderr
	}
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if opts.Cgroup != "" {
		fd, err := syscall.Open(opts.Cgroup, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open cgroup %s: %v", opts.Cgroup, err)
		}
		defer syscall.Close(fd)
		d.Cmd.SysProcAttr.UseCgroupFD, d.Cmd.SysProcAttr.CgroupFD = true, fd
	}
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.PID = d.Cmd.Process.Pid
	go func() {
		d.Cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		// Stop it the proper way first, so its own shutdown is exercised
		// by every test; then make sure nothing of it is left.
		select {
		case <-d.exited: // the test stopped it; its PID may be reused
		default:
			d.terminate(t)
		}
		if t.Failed() {
			t.Logf("mcpgated output:\n%s", d.Stderr.String())
		}
	})
	if listening > 0 {
		d.Stderr.Await(t, 30*time.Second, fmt.Sprintf("systemd-socket-activate listening on %d addresses", listening), func(out string) bool {
			return strings.Count(out, "Listening on ") >= listening
		})
		return d
	}
	if !opts.NoWait {
		d.AwaitReady(t)
	}
	return d
}

// Terminate stops the daemon with SIGTERM, waits for it and returns its
// exit code (-1 if a signal ended it). It fails the test if the daemon does
// not exit within 30s or leaves a process behind.
func (d *Daemon) Terminate(t testing.TB) int {
	t.Helper()
	d.terminate(t)
	if d.Cmd.ProcessState == nil {
		return -1
	}
	return d.Cmd.ProcessState.ExitCode()
}

func (d *Daemon) terminate(t testing.TB) {
	t.Helper()
	pids := Descendants(d.PID)
	syscall.Kill(d.PID, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("mcpgated %d did not exit within 30s of SIGTERM", d.PID)
		KillTree(d.PID)
		<-d.exited
	}
	for _, p := range pids {
		if st := State(p); st != "" {
			t.Errorf("process %d of the daemon survived its shutdown (state %s)", p, st)
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// AwaitExit waits for the daemon to exit and returns its exit code (-1 if
// a signal ended it), failing the test after timeout.
func (d *Daemon) AwaitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-d.exited:
		return d.Cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("mcpgated %d did not exit within %s; output:\n%s", d.PID, timeout, d.Stderr.String())
		return 0
	}
}

// Kill SIGKILLs the daemon and everything it started, by PID, and waits
// until it is reaped. Use it for a daemon that cannot stop by itself.
func (d *Daemon) Kill(t testing.TB) {
	t.Helper()
	KillTree(d.PID)
	d.AwaitExit(t, 10*time.Second)
}

// AwaitReady waits for READY=1, failing early if the daemon exits.
func (d *Daemon) AwaitReady(t testing.TB) {
	t.Helper()
	d.AwaitNotify(t, 0, 60*time.Second, "READY=1", Has("READY=1"))
}

// AwaitNotify waits for an sd_notify datagram, failing early if the daemon
// exits first.
func (d *Daemon) AwaitNotify(t testing.TB, from int, timeout time.Duration, what string, match func(string) bool) int {
	t.Helper()
	type result struct{ i int }
	got := make(chan int, 1)
	sub := &fatalCatcher{TB: t, failed: make(chan string, 1)}
	go func() {
		defer func() { recover() }()
		got <- d.Notify.Await(sub, from, timeout, what, match)
	}()
	select {
	case i := <-got:
		return i
	case msg := <-sub.failed:
		t.Fatal(msg)
	case <-d.exited:
		// The datagram may have arrived just before the exit.
		select {
		case i := <-got:
			return i
		case <-time.After(100 * time.Millisecond):
		}
		t.Fatalf("mcpgated exited (%v) while waiting for sd_notify %s; output:\n%s", d.Cmd.ProcessState, what, d.Stderr.String())
	}
	return -1
}

// fatalCatcher turns Fatalf in a helper goroutine into a message.
type fatalCatcher struct {
	testing.TB
	failed chan string
}

func (f *fatalCatcher) Fatalf(format string, args ...any) {
	f.failed <- fmt.Sprintf(format, args...)
	panic("fatal")
}

func (f *fatalCatcher) Helper() {}

// Exited is closed when the daemon has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig syscall.Signal) { syscall.Kill(d.PID, sig) }

// Connect opens an MCP session with the official Go SDK client.
func (d *Daemon) Connect(t testing.TB, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return Connect(t, d.URL, opts)
}

// LegacySession makes a go-sdk client start a 2025-11-25 session with
// initialize, as the tests of session behaviour need: the SDK speaks
// 2026-07-28 by default, which mcpgate serves without a session.
func LegacySession() *mcp.ClientSessionOptions {
	return &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
}

// Connect opens an MCP session to url with the official Go SDK client and
// closes it when the test ends.
func Connect(t testing.TB, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return ConnectHTTP(t, url, &http.Client{}, opts)
}

// ConnectHTTP is Connect through hc, e.g. UnixHTTPClient's.
func ConnectHTTP(t testing.TB, url string, hc *http.Client, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, LegacySession())
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// UnixHTTPClient returns an HTTP client that sends every request to the
// unix socket at path, whatever host the URL names.
func UnixHTTPClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// ConnectCommand starts cmd, an MCP stdio server, and opens a session with
// it through the official Go SDK client's CommandTransport. The process
// runs in its own process group; when the test ends the session is closed
// (stdin closed, then SIGTERM and SIGKILL as the SDK escalates) and
// whatever is left of the process tree is killed by PID.
func ConnectCommand(t testing.TB, cmd *exec.Cmd, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, LegacySession())
	if cmd.Process != nil {
		pid := cmd.Process.Pid
		t.Cleanup(func() {
			children := Descendants(pid)
			if cs != nil {
				cs.Close() // reaps the process, or gives up after escalating
			}
			if PPID(pid) == os.Getpid() { // not reaped: still ours
				KillTree(pid)
			}
			for _, p := range children {
				syscall.Kill(p, syscall.SIGKILL)
			}
		})
	}
	if err != nil {
		t.Fatalf("connect to %s over stdio: %v", cmd.Path, err)
	}
	return cs
}

// shortTempDir returns a temporary directory with a path short enough for a
// unix socket (at most 108 bytes).
func shortTempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "mg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// ShortTempDir is t.TempDir for paths that must fit a unix socket address.
func ShortTempDir(t testing.TB) string { return shortTempDir(t) }
