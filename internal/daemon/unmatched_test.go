package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestReloadWarnsAboutUnmatchedPatterns: after a reload, a client's
// pattern that matches nothing in the live catalog is a warning with a
// did-you-mean, and the reload summary names the changed client (issue 22,
// items 5 and 10).
func TestReloadWarnsAboutUnmatchedPatterns(t *testing.T) {
	client := func(tools string) string {
		return fmt.Sprintf("[backends.alpha]\ncommand = \"FAKE\"\nargs = [\"--resources\", \"1\"]\n\n[clients.ci]\ntoken_sha256 = %q\ntools = [%s]\nresources = [\"fake://r/*\"]\n", strings.Repeat("ab", 32), tools)
	}
	toml, url := config(t, "", client(`"alpha__echo"`))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	from := len(d.Stderr.String())
	next, _ := config(t, "", client(`"alpha__ehco", "alpha__*"`))
	// Keep the gateway section, with its port, as it was.
	next = toml[:strings.Index(toml, "\n\n")+2] + next[strings.Index(next, "\n\n")+2:]
	if err := os.WriteFile(d.ConfigPath, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	n := len(d.Notify.Messages())
	d.Signal(syscall.SIGHUP)
	i := d.AwaitNotify(t, n, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
	d.AwaitNotify(t, i+1, wait, "READY=1 after the reload", testutil.Has("READY=1"))
	const want = `client \"ci\": tools pattern \"alpha__ehco\" matches no current tool; did you mean \"alpha__echo\"`
	d.Stderr.Await(t, wait, "the warning about alpha__ehco", func(out string) bool { return strings.Contains(out[from:], want) })
	out := d.Stderr.String()[from:]
	if strings.Contains(out, `pattern \"alpha__*\"`) || strings.Contains(out, `pattern \"fake://r/*\"`) {
		t.Errorf("a warning about a pattern that matches:\n%s", out)
	}
	if !strings.Contains(out, "configuration reloaded: unchanged alpha; clients changed ci") {
		t.Errorf("the reload summary does not name the changed client:\n%s", out)
	}
}

// TestReloadWarnsOnceItsBackendsSettled: the reload does not wait for the
// backend it adds, so the warnings about unmatched patterns wait for it
// instead: none while it is in its handshake, where a pattern for its
// tools would match nothing yet, and once it is ready only the typo.
func TestReloadWarnsOnceItsBackendsSettled(t *testing.T) {
	client := func(tools string) string {
		return fmt.Sprintf("\n[clients.ci]\ntoken_sha256 = %q\ntools = [%s]\n", strings.Repeat("ab", 32), tools)
	}
	toml, url := config(t, "", "[backends.alpha]\ncommand = \"FAKE\"\n"+client(`"alpha__echo"`))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	gate := filepath.Join(t.TempDir(), "slow.record")
	next := toml[:strings.Index(toml, "\n[clients.ci]")] +
		fmt.Sprintf("\n[backends.slow]\ncommand = %q\nargs = [\"--record\", %q, \"--initialize-barrier\", \"2\"]\n", testutil.Build(t).Fake, gate) +
		client(`"alpha__echo", "slow__echo", "slow__ehco"`)
	if err := os.WriteFile(d.ConfigPath, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	from := len(d.Stderr.String())
	n := len(d.Notify.Messages())
	d.Signal(syscall.SIGHUP)
	i := d.AwaitNotify(t, n, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
	d.AwaitNotify(t, i+1, wait, "READY=1 while slow is in its handshake", testutil.Has("READY=1"))
	d.Stderr.Await(t, wait, "the reload summary", func(out string) bool {
		return strings.Contains(out[from:], "configuration reloaded: added slow; unchanged alpha; clients changed ci")
	})
	// slow cannot settle before its gate opens: no warning can be due yet.
	if out := d.Stderr.String()[from:]; strings.Contains(out, "matches no current tool") {
		t.Errorf("a warning while slow is in its handshake:\n%s", out)
	}
	openGate(t, gate)
	const want = `client \"ci\": tools pattern \"slow__ehco\" matches no current tool; did you mean \"slow__echo\"`
	d.Stderr.Await(t, wait, "the warning about slow__ehco", func(out string) bool { return strings.Contains(out[from:], want) })
	if out := d.Stderr.String()[from:]; strings.Contains(out, `pattern \"slow__echo\"`) || strings.Contains(out, `pattern \"alpha__echo\"`) {
		t.Errorf("a warning about a pattern that matches:\n%s", out)
	}
}

// TestNoUnmatchedWarningsAtStop: a daemon stopped while a backend that a
// reload added is still in its handshake says nothing about patterns that
// match nothing: the catalog empties because it stops.
func TestNoUnmatchedWarningsAtStop(t *testing.T) {
	client := fmt.Sprintf("\n[clients.ci]\ntoken_sha256 = %q\ntools = [\"alpha__echo\", \"slow__echo\"]\n", strings.Repeat("ab", 32))
	toml, url := config(t, "", "[backends.alpha]\ncommand = \"FAKE\"\n"+client)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	gate := filepath.Join(t.TempDir(), "slow.record")
	next := toml[:strings.Index(toml, "\n[clients.ci]")] +
		fmt.Sprintf("\n[backends.slow]\ncommand = %q\nargs = [\"--record\", %q, \"--initialize-barrier\", \"2\"]\n", testutil.Build(t).Fake, gate) + client
	if err := os.WriteFile(d.ConfigPath, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	from := len(d.Stderr.String())
	n := len(d.Notify.Messages())
	d.Signal(syscall.SIGHUP)
	i := d.AwaitNotify(t, n, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
	d.AwaitNotify(t, i+1, wait, "READY=1 while slow is in its handshake", testutil.Has("READY=1"))
	d.Signal(syscall.SIGTERM)
	if code := d.AwaitExit(t, wait); code != 0 {
		t.Errorf("mcpgated exited %d after SIGTERM, want 0", code)
	}
	if out := d.Stderr.String()[from:]; strings.Contains(out, "matches no current tool") {
		t.Errorf("warnings about unmatched patterns while stopping:\n%s", out)
	}
}
