package daemon_test

import (
	"fmt"
	"os"
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
