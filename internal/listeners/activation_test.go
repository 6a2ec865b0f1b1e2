package listeners

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// The activation tests run this test binary as the daemon under the real
// systemd-socket-activate: with helperEnv set, TestMain runs helperMain
// instead of the tests.
const (
	helperEnv = "MCPGATE_LISTENERS_HELPER" // the report socket's path
	// helperListen is what the helper passes as listen addresses: binding it
	// fails, so a report of success proves the sockets came from systemd.
	helperListen = "unix:not/absolute.sock"
)

func TestMain(m *testing.M) {
	if report := os.Getenv(helperEnv); report != "" {
		os.Exit(helperMain(report))
	}
	os.Exit(m.Run())
}

// helperReport is what the helper tells the test about Open's result.
type helperReport struct {
	Err       string
	Activated bool
	Listeners []helperListener
	Logs      []string
	EnvLeft   []string // LISTEN_* variables still set after Open
}

type helperListener struct{ Name, Network, Addr string }

// helperMain is the daemon stand-in: it opens its listeners, reports on the
// socket at report, answers every connection with "<name> <addr>", and on
// "close" from the test closes its listeners and answers "closed".
func helperMain(report string) int {
	h := &testutil.LogRecorder{}
	set, err := Open([]string{helperListen}, slog.New(h))
	var rep helperReport
	if err != nil {
		rep.Err = err.Error()
	} else {
		rep.Activated = set.Activated
		for _, l := range set.Listeners {
			rep.Listeners = append(rep.Listeners, helperListener{l.Name, l.Addr().Network(), l.Addr().String()})
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%s %s\n", l.Name, l.Addr())
					c.Close()
				}
			}()
		}
	}
	rep.Logs = h.Messages()
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LISTEN_") {
			rep.EnvLeft = append(rep.EnvLeft, kv)
		}
	}
	conn, cerr := net.Dial("unix", report)
	if cerr != nil {
		fmt.Fprintln(os.Stderr, "helper:", cerr)
		return 2
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err != nil {
		return 1
	}
	cmds := bufio.NewScanner(conn)
	for cmds.Scan() {
		if cmds.Text() == "close" {
			fmt.Fprintf(conn, "closed %v\n", set.Close())
		}
	}
	return 0
}

// activator is systemd-socket-activate running the helper.
type activator struct {
	report net.Listener
	stderr chan string // lines from systemd-socket-activate and the helper
}

// startActivation runs systemd-socket-activate with args in front of the
// helper, and returns once it listens on all of them (it execs the helper on
// the first connection). The process group it leads is killed and the
// process reaped when the test ends.
func startActivation(t *testing.T, args ...string) (*activator, error) {
	t.Helper()
	tool, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		testutil.Unavailable(t, "systemd-socket-activate not installed: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reportPath := filepath.Join(t.TempDir(), "report.sock")
	report, err := net.Listen("unix", reportPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { report.Close() })

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "-E", helperEnv+"="+reportPath, self, "-test.run=^$")
	cmd := exec.Command(tool, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("start %s: %v", tool, err)
	}
	a := &activator{report: report, stderr: make(chan string, 100)}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(a.stderr)
		lines := bufio.NewScanner(r)
		for lines.Scan() {
			t.Logf("socket-activate: %s", lines.Text())
			select {
			case a.stderr <- lines.Text():
			default: // never block: the test may have stopped reading
			}
		}
	}()
	t.Cleanup(func() {
		// Kill the group: systemd-socket-activate or the helper it became,
		// and any child it spawned for Accept=yes. Then reap ours.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		r.Close()
		<-readerDone
	})

	want := 0
	for _, arg := range args {
		if arg == "-l" {
			want++
		}
	}
	for listening := 0; listening < want; {
		line, err := a.nextLine(t)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(line, "Listening on "):
			listening++
		case strings.HasPrefix(line, "Failed to "):
			return nil, errors.New(line)
		}
	}
	return a, nil
}

// nextLine returns the next output line, or an error if the output ended or
// nothing came in time.
func (a *activator) nextLine(t *testing.T) (string, error) {
	t.Helper()
	select {
	case line, ok := <-a.stderr:
		if !ok {
			return "", errors.New("systemd-socket-activate exited")
		}
		return line, nil
	case <-time.After(waitFor):
		return "", fmt.Errorf("no output from systemd-socket-activate within %v", waitFor)
	}
}

// awaitLine waits for an output line containing s.
func (a *activator) awaitLine(t *testing.T, s string) {
	t.Helper()
	for {
		line, err := a.nextLine(t)
		if err != nil {
			t.Fatalf("waiting for %q: %v", s, err)
		}
		if strings.Contains(line, s) {
			return
		}
	}
}

// helper is the connection on which the helper reported.
type helper struct {
	conn net.Conn
	r    *bufio.Reader
	helperReport
}

// awaitReport accepts the helper's report.
func (a *activator) awaitReport(t *testing.T) *helper {
	t.Helper()
	a.report.(*net.UnixListener).SetDeadline(time.Now().Add(waitFor))
	conn, err := a.report.Accept()
	if err != nil {
		t.Fatalf("no report from the helper: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(waitFor))
	h := &helper{conn: conn, r: bufio.NewReader(conn)}
	if err := json.NewDecoder(h.r).Decode(&h.helperReport); err != nil {
		t.Fatalf("read the helper's report: %v", err)
	}
	t.Logf("helper report: %+v", h.helperReport)
	return h
}

// close has the helper close its listeners.
func (h *helper) close(t *testing.T) {
	t.Helper()
	fmt.Fprintln(h.conn, "close")
	line, err := h.r.ReadString('\n')
	if err != nil || line != "closed <nil>\n" {
		t.Fatalf("helper closing its listeners: %q, %v", line, err)
	}
}

// request connects to addr and returns what the helper answers.
func request(t *testing.T, network, addr string) string {
	t.Helper()
	c, err := net.DialTimeout(network, addr, waitFor)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	return string(b)
}

// freeTCPAddr returns a loopback address with a port reserved for the
// test (testutil.FreePort): systemd-socket-activate refuses port 0.
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
}

func TestActivationTCPAndUnix(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mcpgate.sock")
	var a *activator
	var tcpAddr string
	for attempt := 0; ; attempt++ {
		tcpAddr = freeTCPAddr(t)
		var err error
		a, err = startActivation(t, "-l", tcpAddr, "-l", sock, "--fdname=http:http")
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatal(err)
		}
		t.Logf("retrying with another port: %v", err) // someone took the port meanwhile
	}

	// The first connection starts the daemon and is answered.
	if got, want := request(t, "tcp", tcpAddr), "http "+tcpAddr+"\n"; got != want {
		t.Errorf("first connection answered %q, want %q", got, want)
	}
	h := a.awaitReport(t)
	if h.Err != "" {
		t.Fatalf("Open failed under socket activation: %s", h.Err)
	}
	want := []helperListener{{"http", "tcp", tcpAddr}, {"http", "unix", sock}}
	if !h.Activated || fmt.Sprint(h.Listeners) != fmt.Sprint(want) {
		t.Errorf("got Activated=%v %v, want true %v", h.Activated, h.Listeners, want)
	}
	if len(h.EnvLeft) != 0 {
		t.Errorf("%v still set after Open; children would inherit them", h.EnvLeft)
	}
	if len(h.Logs) != 0 {
		t.Errorf("unexpected log %q", h.Logs)
	}
	if got, want := request(t, "unix", sock), "http "+sock+"\n"; got != want {
		t.Errorf("unix socket answered %q, want %q", got, want)
	}

	// systemd's socket file survives the daemon closing its listeners.
	h.close(t)
	if !isSocket(t, sock) {
		t.Error("closing an activated listener removed systemd's socket file")
	}
}

func TestActivationUnknownNameIsClosed(t *testing.T) {
	dir := t.TempDir()
	httpSock, otherSock := filepath.Join(dir, "http.sock"), filepath.Join(dir, "other.sock")
	a, err := startActivation(t, "-l", httpSock, "-l", otherSock, "--fdname=http:other")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := request(t, "unix", httpSock), "http "+httpSock+"\n"; got != want {
		t.Errorf("first connection answered %q, want %q", got, want)
	}
	h := a.awaitReport(t)
	if h.Err != "" || len(h.Listeners) != 1 {
		t.Fatalf("got %v, %q; want the http listener only", h.Listeners, h.Err)
	}
	if len(h.Logs) != 1 || !strings.Contains(h.Logs[0], "name=other") {
		t.Errorf("log %q: want one message naming the other socket", h.Logs)
	}
	c, err := net.DialTimeout("unix", otherSock, waitFor)
	if err == nil {
		c.Close()
		t.Fatal("connected to the other socket; want it closed by the daemon")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect to the closed other socket: %v, want connection refused", err)
	}
}

func TestActivationAcceptYesIsRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mcpgate.sock")
	a, err := startActivation(t, "--accept", "-l", sock, "--fdname=http")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("unix", sock, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := a.awaitReport(t)
	for _, want := range []string{"connected socket", "Accept=yes", "set Accept=no in mcpgate.socket"} {
		if !strings.Contains(h.Err, want) {
			t.Errorf("Open error %q, want it to say %q", h.Err, want)
		}
	}
	// The refused connection is closed, not left hanging...
	c.SetDeadline(time.Now().Add(waitFor))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("read on the refused connection: %d, %v; want EOF", n, err)
	}
	// ...and the helper exited non-zero and was reaped by its parent.
	a.awaitLine(t, "died with code 1")
}
