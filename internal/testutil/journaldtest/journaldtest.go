// Package journaldtest runs a private systemd-journald for a test and reads back what it stored.
package journaldtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Binary is the systemd-journald Start runs.
const Binary = "/lib/systemd/systemd-journald"

// AwaitTimeout is how long Await waits for its condition.
const AwaitTimeout = 15 * time.Second

// journaldConf is the drop-in that makes journald fit for tests.
const journaldConf = `[Journal]
Storage=volatile
RateLimitIntervalSec=0
RateLimitBurst=0
ReadKMsg=no
Audit=no
ForwardToSyslog=no
ForwardToKMsg=no
ForwardToConsole=no
ForwardToWall=no
RuntimeMaxUse=256M
`

// mountScript runs inside the new mount namespace and becomes journald.
// $1 is the test's directory.
const mountScript = `set -e
mount -t tmpfs -o mode=0755 mcpgate-journaldtest /run
mount -t tmpfs -o mode=0755 mcpgate-journaldtest /var/log
mkdir /run/systemd /run/log
mount --bind "$1/systemd" /run/systemd
mount --bind "$1/log" /run/log
exec ` + Binary

// Journald is one running private systemd-journald.
type Journald struct {
	dir  string
	pid  int
	exit chan struct{} // closed when the process was reaped
	out  *bytes.Buffer // journald's own messages; read only after exit
}

// Start starts /lib/systemd/systemd-journald as an ordinary process in its
// own mount namespace (unshare -m, propagation private). Inside it, /run and
// /var/log are fresh tmpfs mounts, and /run/systemd and /run/log are bind
// mounts of two directories under one temporary directory of the test, so:
//
//   - journald's sockets are ordinary paths in the host's file system:
//     Socket() (native protocol) and StdoutSocket() (stream protocol). Any
//     process — the test itself or a child such as the daemon binary — logs
//     into this journald by being given that path (the daemon's journal
//     socket option), or by getting a stream from Stream as its stderr
//     together with JOURNAL_STREAM, exactly as systemd would set them up;
//   - the journal files land in Dir(), read with
//     `journalctl -D Dir() -o json --all`;
//   - nothing of the host's /run/systemd, /run/log or /var/log is touched.
//
// The configuration is a drop-in in the private /run/systemd/journald.conf.d
// (which journald 252 reads after /etc): volatile storage, no rate limit,
// no kernel log, no forwarding. Start waits for journald's READY=1 on a
// private NOTIFY_SOCKET. The process is killed and reaped by PID in
// t.Cleanup. Start returns once journald is ready; it skips t when not
// root and fails it when journald or unshare is missing or does not start.
func Start(t testing.TB) *Journald {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "journaldtest: needs root to run systemd-journald in a private mount namespace (unshare -m); run as root, as make check does")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("journaldtest: unshare (util-linux) not found: %v", err)
	}
	if _, err := os.Stat(Binary); err != nil {
		t.Fatalf("journaldtest: %v; install systemd", err)
	}

	// Not t.TempDir: socket paths must stay under 108 bytes, and test
	// names make TempDir paths long.
	dir, err := os.MkdirTemp("", "journald-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Readable by every user, so children running unprivileged reach the
	// sockets.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"systemd/journald.conf.d", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "systemd/journald.conf.d/zz-journaldtest.conf")
	if err := os.WriteFile(conf, []byte(journaldConf), 0o644); err != nil {
		t.Fatal(err)
	}

	notifyPath := filepath.Join(dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatalf("journaldtest: notify socket: %v", err)
	}
	defer notify.Close()

	j := &Journald{dir: dir, exit: make(chan struct{}), out: new(bytes.Buffer)}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", mountScript, "journaldtest", dir)
	cmd.Env = append(os.Environ(),
		"NOTIFY_SOCKET="+notifyPath,
		"SYSTEMD_LOG_TARGET=console",
		"SYSTEMD_LOG_COLOR=0",
	)
	cmd.Stdout = j.out
	cmd.Stderr = j.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("journaldtest: start %s: %v", Binary, err)
	}
	j.pid = cmd.Process.Pid // unshare and sh exec, so this is journald's pid
	go func() {
		cmd.Wait()
		close(j.exit)
	}()
	t.Cleanup(func() {
		syscall.Kill(j.pid, syscall.SIGKILL)
		<-j.exit
	})

	ready := make(chan error, 1)
	go func() { ready <- awaitReady(notify) }()
	select {
	case err := <-ready:
		if err != nil {
			syscall.Kill(j.pid, syscall.SIGKILL)
			<-j.exit
			t.Fatalf("journaldtest: journald did not report READY=1: %v\n%s", err, j.out)
		}
	case <-j.exit:
		t.Fatalf("journaldtest: journald exited before it was ready:\n%s", j.out)
	}
	return j
}

// awaitReady reads sd_notify datagrams until READY=1, for at most 10 s.
func awaitReady(c *net.UnixConn) error {
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(buf[:n]), "\n") {
			if l == "READY=1" {
				return nil
			}
		}
	}
}

// PID returns journald's process id.
func (j *Journald) PID() int { return j.pid }

// Socket returns the path of the native protocol socket, inside the
// namespace /run/systemd/journal/socket.
func (j *Journald) Socket() string { return filepath.Join(j.dir, "systemd/journal/socket") }

// StdoutSocket returns the path of the stream protocol socket, inside the
// namespace /run/systemd/journal/stdout.
func (j *Journald) StdoutSocket() string { return filepath.Join(j.dir, "systemd/journal/stdout") }

// Dir returns the directory holding the journal files, for journalctl -D.
func (j *Journald) Dir() string { return filepath.Join(j.dir, "log/journal") }

// Suspend sends SIGSTOP to journald, so its sockets fill up and writers
// block, as with a hung journald. Cleanup still kills it; Resume resumes it.
func (j *Journald) Suspend(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(j.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("journaldtest: stop journald: %v", err)
	}
}

// Resume lets journald run again after Suspend.
func (j *Journald) Resume(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(j.pid, syscall.SIGCONT); err != nil {
		t.Fatalf("journaldtest: continue journald: %v", err)
	}
}

// Stream opens a stream connection as systemd does for a service's stderr
// (identifier and priority 6, no level prefix parsing) and returns the
// file to use as a child's stderr and the JOURNAL_STREAM value that
// matches it. The file is closed in t.Cleanup; close it earlier once a
// child holds its copy.
func (j *Journald) Stream(t testing.TB, identifier string) (f *os.File, journalStream string) {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: j.StdoutSocket(), Net: "unix"})
	if err != nil {
		t.Fatalf("journaldtest: stream: %v", err)
	}
	defer c.Close()
	// identifier, unit id, priority, level prefix, forward to syslog,
	// kmsg, console: the header of journald's stream protocol.
	header := identifier + "\n\n6\n0\n0\n0\n0\n"
	if _, err := c.Write([]byte(header)); err != nil {
		t.Fatalf("journaldtest: stream header: %v", err)
	}
	if err := c.CloseRead(); err != nil {
		t.Fatalf("journaldtest: stream: %v", err)
	}
	f, err = c.File()
	if err != nil {
		t.Fatalf("journaldtest: stream: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatalf("journaldtest: stream: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return f, fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// Entry is one journal entry: field name to value. Binary values are
// decoded to their bytes; of a field given several times the first value
// is kept.
type Entry map[string]string

// Entries returns every entry stored so far, oldest first, journald's own
// included.
func (j *Journald) Entries(t testing.TB) []Entry {
	t.Helper()
	out, err := exec.Command("journalctl", "-D", j.Dir(), "-o", "json", "--all", "--no-pager", "-q").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("journaldtest: journalctl -D %s: %v\n%s", j.Dir(), err, msg)
	}
	var entries []Entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		e, err := decodeEntry(sc.Bytes())
		if err != nil {
			t.Fatalf("journaldtest: journalctl output: %v\n%.500s", err, sc.Bytes())
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("journaldtest: journalctl output: %v", err)
	}
	return entries
}

// decodeEntry decodes one line of journalctl -o json: values are strings,
// arrays of byte values (binary data), or arrays of those (repeated
// fields).
func decodeEntry(line []byte) (Entry, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, err
	}
	e := make(Entry, len(raw))
	for k, v := range raw {
		s, err := decodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
		e[k] = s
	}
	return e, nil
}

func decodeValue(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var b []byte
	var nums []int
	if json.Unmarshal(v, &nums) == nil {
		b = make([]byte, len(nums))
		for i, n := range nums {
			b[i] = byte(n)
		}
		return string(b), nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(v, &many); err != nil || len(many) == 0 {
		return "", fmt.Errorf("unexpected value %.100s", v)
	}
	return decodeValue(many[0])
}

// Await polls the journal until cond holds for its entries and returns
// them; it fails t with the entries seen last when AwaitTimeout passes
// first. what says what is awaited.
func (j *Journald) Await(t testing.TB, what string, cond func([]Entry) bool) []Entry {
	t.Helper()
	deadline := time.Now().Add(AwaitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		entries := j.Entries(t)
		if cond(entries) {
			return entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("journaldtest: after %s still waiting for %s; the journal holds:\n%s", AwaitTimeout, what, Dump(entries))
		}
		select {
		case <-tick.C:
		case <-j.exit:
			t.Fatalf("journaldtest: journald exited while waiting for %s:\n%s", what, j.out)
		}
	}
}

// AwaitMatch waits until at least n entries have all the fields in match
// and returns those entries.
func (j *Journald) AwaitMatch(t testing.TB, n int, match Entry) []Entry {
	t.Helper()
	var found []Entry
	j.Await(t, fmt.Sprintf("%d entries with %v", n, match), func(es []Entry) bool {
		found = Select(es, match)
		return len(found) >= n
	})
	return found
}

// Select returns the entries that have every field of match with its
// value.
func Select(entries []Entry, match Entry) []Entry {
	var out []Entry
next:
	for _, e := range entries {
		for k, v := range match {
			if got, ok := e[k]; !ok || got != v {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// Dump formats entries for failure messages, leaving out journald's
// address fields and cutting long values.
func Dump(entries []Entry) string {
	var b strings.Builder
	for i, e := range entries {
		keys := make([]string, 0, len(e))
		for k := range e {
			if !strings.HasPrefix(k, "__") && !strings.HasPrefix(k, "_") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "#%d", i)
		for _, k := range keys {
			v := e[k]
			if len(v) > 120 {
				v = v[:120] + "…(" + strconv.Itoa(len(v)) + " bytes)"
			}
			fmt.Fprintf(&b, " %s=%q", k, v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
