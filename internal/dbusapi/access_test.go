package dbusapi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// environ reads the environment a process started with.
func environ(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func hasVar(env []string, kv string) bool {
	for _, e := range env {
		if e == kv || strings.HasPrefix(e, kv) && strings.HasSuffix(kv, "=") {
			return true
		}
	}
	return false
}

// TestCredentialsStaySecret: a ${credential:NAME} in a backend's env
// reaches that child and nothing else: not a sibling, not the journal (the
// daemon's output at debug level), not D-Bus, not mcpgatectl status, not
// the error of a backend whose credential is missing. Children get a
// minimal environment plus what inherit_env names.
func TestCredentialsStaySecret(t *testing.T) {
	const secret = "s3cr3t-credential-value-4711"
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "api"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGatewayEnv(t, dbustest.Options{}, `
[backends.alpha]
command = "FAKE"
env = { API_KEY = "${credential:api}", NOT_SECRET = "plain" }
inherit_env = ["MCPGATE_ITEST_INHERITED"]

[backends.beta]
command = "FAKE"

[backends.gamma]
command = "FAKE"
args = ["--name", "x${credential:missing}"]
max_restarts = 0
`, fmt.Sprintf("credentials_directory = %q", creds), []string{"MCPGATE_ITEST_INHERITED=yes", "MCPGATE_ITEST_DAEMON_ONLY=daemon-secret"})

	alpha, beta := environ(t, g.mainPID(t, "alpha")), environ(t, g.mainPID(t, "beta"))
	for _, want := range []string{"API_KEY=" + secret, "NOT_SECRET=plain", "MCPGATE_ITEST_INHERITED=yes", "PATH="} {
		if !hasVar(alpha, want) {
			t.Errorf("alpha's environment has no %s: %q", want, alpha)
		}
	}
	for _, env := range [][]string{alpha, beta} {
		if hasVar(env, "MCPGATE_ITEST_DAEMON_ONLY=") {
			t.Errorf("a child inherited a daemon variable it does not name in inherit_env: %q", env)
		}
	}
	if strings.Contains(strings.Join(beta, "\n"), secret) || hasVar(beta, "API_KEY=") {
		t.Errorf("beta's environment holds alpha's credential: %q", beta)
	}

	// gamma cannot start: its error names the placeholder.
	testutil.Eventually(t, 30*time.Second, "gamma failed", func() bool {
		st, err := g.client.Backend(ctx(t), "gamma")
		return err == nil && strings.Contains(st.LastError, "${credential:missing}")
	})

	var seen []string
	for _, name := range []string{"alpha", "beta", "gamma"} {
		seen = append(seen, g.mustBusctl(t, "--json=short", "call", dbusapi.BusName, string(dbusapi.BackendPath(name)),
			"org.freedesktop.DBus.Properties", "GetAll", "s", dbusapi.BackendInterface))
	}
	seen = append(seen, g.mustBusctl(t, "--json=short", "call", dbusapi.BusName, string(dbusapi.ManagerPath),
		"org.freedesktop.DBus.Properties", "GetAll", "s", dbusapi.ManagerInterface))
	if !strings.Contains(strings.Join(seen, "\n"), "${credential:missing}") {
		t.Errorf("D-Bus does not show gamma's placeholder: %s", seen)
	}
	bins := testutil.Build(t)
	for _, args := range [][]string{{"status", "--json"}, {"status", "alpha"}, {"status", "gamma"}} {
		cmd := exec.Command(bins.Ctl, args...)
		cmd.Env = testutil.Env("DBUS_SYSTEM_BUS_ADDRESS=" + g.bus.Address)
		out, _ := cmd.CombinedOutput() // gamma is not healthy: exit 3
		seen = append(seen, string(out))
	}
	seen = append(seen, g.daemon.Stderr.String())
	for i, text := range seen {
		if strings.Contains(text, secret) {
			t.Errorf("the credential's value is shown (source %d):\n%s", i, text)
		}
	}
}

// TestBackendCannotControlGateway: a process a backend started runs as
// the gateway's user (here root) but is not the gateway: its StopBackend
// and Reload go to polkit, which this bus does not have, and are denied.
func TestBackendCannotControlGateway(t *testing.T) {
	out := filepath.Join(t.TempDir(), "busctl.out")
	manager := fmt.Sprintf("busctl --address=\"$BUS\" call %s %s %s", dbusapi.BusName, dbusapi.ManagerPath, dbusapi.ManagerInterface)
	// FAKE is replaced by the fake server's path, as in every backend.
	script := fmt.Sprintf(`BUS=$DBUS_SYSTEM_BUS_ADDRESS; %[1]s StopBackend s victim >>%[2]s 2>&1; %[1]s Reload >>%[2]s 2>&1; echo done >>%[2]s; exec FAKE`, manager, out)
	g := startGateway(t, dbustest.Options{}, fmt.Sprintf(`
[backends.victim]
command = "FAKE"

[backends.spy]
command = "/bin/sh"
args = ["-c", %q]
inherit_env = ["DBUS_SYSTEM_BUS_ADDRESS"]
`, script), "")
	testutil.Eventually(t, 60*time.Second, "the backend's busctl calls ended", func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "done")
	})
	b, _ := os.ReadFile(out)
	if strings.Count(strings.ToLower(string(b)), "denied") < 2 {
		t.Errorf("the backend's calls answered %q, want both denied", b)
	}
	if got := g.property(t, "victim", "State"); got != `s "healthy"` {
		t.Errorf("victim is %s after a backend asked to stop it", got)
	}
	// The test itself, root and not a backend, may.
	if err := g.client.Reload(ctx(t)); err != nil {
		t.Errorf("Reload by root outside the gateway: %v", err)
	}
}

// TestStderrTailOnlyForJournalReaders: what a backend printed or said may
// hold secrets; nobody (uid 65534) gets an empty StderrTail and LastError
// from GetAll and an AccessDenied error from Get, root gets them. Here
// beta's LastError holds the error message its initialize answer carried.
func TestStderrTailOnlyForJournalReaders(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "needs root to run busctl as nobody")
	}
	policy := filepath.Join(testutil.ModuleRoot(), "packaging", "dbus", "org.mcpgate.Gateway1.conf")
	g := startGateway(t, dbustest.Options{System: true, Include: []string{policy}}, `
[backends.alpha]
command = "FAKE"

[backends.beta]
command = "/bin/sh"
args = ["-c", "read -r line; echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"no server/discover\"}}'; read -r line; echo '{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32603,\"message\":\"token=said-by-the-server\"}}'; sleep 60"]
max_restarts = 0
`, "")
	testutil.Eventually(t, 30*time.Second, "beta's LastError with the server's message", func() bool {
		return strings.Contains(g.property(t, "beta", "LastError"), "said-by-the-server")
	})
	for _, prop := range []string{"StderrTail", "LastError"} {
		_, err := g.busctl(t, true, "get-property", dbusapi.BusName, string(dbusapi.BackendPath("beta")), dbusapi.BackendInterface, prop)
		if err == nil || !strings.Contains(err.Error(), "journal") {
			t.Errorf("Get %s as nobody: %v; want access denied", prop, err)
		}
	}
	if out, err := g.busctl(t, true, "call", dbusapi.BusName, string(dbusapi.BackendPath("beta")), "org.freedesktop.DBus.Properties", "GetAll", "s", dbusapi.BackendInterface); err != nil || !strings.Contains(out, `"LastError" s ""`) {
		t.Errorf("GetAll of beta as nobody: %v %s; want every property, LastError empty", err, out)
	}
	cs := g.daemon.Connect(t, nil)
	testutil.MustCallTool(t, cs, "alpha__stderr", map[string]any{"text": "token=printed-by-the-server", "repeat": 1})
	testutil.Eventually(t, 30*time.Second, "the stderr line in StderrTail", func() bool {
		return strings.Contains(g.property(t, "alpha", "StderrTail"), "printed-by-the-server")
	})
	getAll := []string{"call", dbusapi.BusName, string(dbusapi.BackendPath("alpha")), "org.freedesktop.DBus.Properties", "GetAll", "s", dbusapi.BackendInterface}
	out, err := g.busctl(t, true, getAll...)
	if err != nil || strings.Contains(out, "printed-by-the-server") || !strings.Contains(out, "StderrTail") {
		t.Errorf("GetAll as nobody: %v %s; want every property, StderrTail empty", err, out)
	}
	_, err = g.busctl(t, true, "get-property", dbusapi.BusName, string(dbusapi.BackendPath("alpha")), dbusapi.BackendInterface, "StderrTail")
	if err == nil || !strings.Contains(err.Error(), "journal") {
		t.Errorf("Get StderrTail as nobody: %v; want access denied, saying who may read it", err)
	}
	if out, err := g.busctl(t, true, "get-property", dbusapi.BusName, string(dbusapi.BackendPath("alpha")), dbusapi.BackendInterface, "State"); err != nil {
		t.Errorf("Get State as nobody: %v %s; other properties stay readable", err, out)
	}
}
