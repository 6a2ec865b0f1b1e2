package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/cgroup/cgrouptest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Under a delegated cgroup each cli call runs in a cgroup of its own: a
// program's child that left its process group and session (setsid) and
// holds its pipes does not keep the call past its timeout, nor the call's
// max_concurrent_calls slot, and is killed with the call.
func TestCLICallTimeoutKillsAnEscapedGrandchild(t *testing.T) {
	dir := cgrouptest.New(t)
	pidFile := filepath.Join(t.TempDir(), "escaped")
	toml, url := testutil.Config(t, `
[backends.sh]
transport = "cli"
max_concurrent_calls = 1
queue_timeout = "1h"

[backends.sh.tools.escape]
command = ["sh", "-c", "setsid sh -c 'echo $$ > \"$0\"; sleep 8; touch \"$0.ended\"' \"$1\" & echo started", "sh", "`+pidFile+`"]
timeout = "500ms"

[backends.sh.tools.quick]
command = ["echo", "quick"]
`)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Cgroup: dir})
	cs := d.Connect(t, nil)
	res, err := testutil.CallTool(t, cs, "sh__escape", nil)
	if err != nil || !res.IsError || !strings.Contains(testutil.ToolText(res), "timeout") {
		t.Fatalf("call: %v %v; want a timeout result", res, err)
	}
	b, err := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("no pid of the escaped grandchild: %v", err)
	}
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })
	if _, err := os.Stat(pidFile + ".ended"); err == nil {
		t.Errorf("the call ended only once the escaped grandchild had: it waited for the pipes it held")
	}
	if st := testutil.State(pid); st != "" {
		t.Errorf("escaped grandchild %d outlived its call (state %s); want it killed with the call's cgroup", pid, st)
	}
	// The slot is free: the next call runs at once.
	if got := strings.TrimSpace(testutil.ToolText(testutil.MustCallTool(t, cs, "sh__quick", nil))); got != "quick" {
		t.Errorf("next call: %q", got)
	}
}

// ${credential:NAME} in a cli tool's env is filled in from the
// credentials directory, as for a server's env; --check-config accepts
// the same configuration.
func TestCLIToolEnvCredential(t *testing.T) {
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "tok"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	backends := `
[backends.sh]
transport = "cli"

[backends.sh.tools.token]
command = ["sh", "-c", "echo \"TOKEN=$TOKEN\""]
env = { TOKEN = "${credential:tok}" }
`
	d := gatewayWith(t, fmt.Sprintf("credentials_directory = %q", creds), backends)
	cs := d.Connect(t, nil)
	if got := strings.TrimSpace(testutil.ToolText(testutil.MustCallTool(t, cs, "sh__token", nil))); got != "TOKEN=s3cret" {
		t.Errorf("the program got %q; want the credential's content", got)
	}
	if strings.Contains(d.Stderr.String(), "s3cret") {
		t.Error("the credential's value reached the daemon's log")
	}
	out, err := exec.Command(testutil.Build(t).Daemon, "--check-config", "--config", d.ConfigPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Errorf("--check-config: %v\n%s", err, out)
	}
	// A credential that cannot be read fails the call with its name.
	if err := os.Remove(filepath.Join(creds, "tok")); err != nil {
		t.Fatal(err)
	}
	_, err = testutil.CallTool(t, cs, "sh__token", nil)
	if err == nil || !strings.Contains(err.Error(), "${credential:tok}") {
		t.Errorf("call without the credential: %v; want an error naming ${credential:tok}", err)
	}
}

// Without a cgroup too, a cli call whose program's child left its process
// group neither holds the gateway's shutdown nor outlives it: the
// descendant holding the call's pipes is found by them and killed (the
// daemon's shutdown fails the test if a process of it survives).
func TestCLIEscapedGrandchildEndsWithTheGateway(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "escaped")
	d := gatewayWith(t, `drain_timeout = "200ms"`, `
[backends.sh]
transport = "cli"

[backends.sh.tools.escape]
command = ["sh", "-c", "setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' \"$1\"; echo started", "sh", "`+pidFile+`"]
timeout = "1h"
`)
	cs := d.Connect(t, nil)
	called := make(chan error, 1)
	go func() {
		_, err := testutil.CallTool(t, cs, "sh__escape", nil)
		called <- err
	}()
	var pid int
	testutil.Eventually(t, 10*time.Second, "the escaped grandchild's pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })
	d.Terminate(t)
	if st := testutil.State(pid); st != "" {
		t.Errorf("the escaped grandchild %d outlived the gateway (state %s)", pid, st)
	}
	<-called
}
