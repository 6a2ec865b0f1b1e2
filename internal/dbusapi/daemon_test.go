package dbusapi_test

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// gateway is a real mcpgated on a private bus, and a connection of the
// test's own to that bus that records the gateway's signals.
type gateway struct {
	bus    *dbustest.Bus
	daemon *testutil.Daemon
	conn   *dbus.Conn
	client *dbusapi.Client

	signals testutil.Recorder[*dbus.Signal]
}

// startGateway runs mcpgated with bus = "system" pointed at a private bus;
// FAKE in backends is replaced by the fake server's path.
func startGateway(t *testing.T, busOpts dbustest.Options, backends, gatewayLines string) *gateway {
	t.Helper()
	return startGatewayEnv(t, busOpts, backends, gatewayLines, nil)
}

// startGatewayEnv is startGateway with env added to the daemon's
// environment.
func startGatewayEnv(t *testing.T, busOpts dbustest.Options, backends, gatewayLines string, env []string) *gateway {
	t.Helper()
	return startGatewayConfig(t, busOpts, backends, testutil.ConfigOptions{Gateway: gatewayLines}, env)
}

// startGatewayConfig is startGatewayEnv with the choices of cfgOpts; its
// Bus is always "system".
func startGatewayConfig(t *testing.T, busOpts dbustest.Options, backends string, cfgOpts testutil.ConfigOptions, env []string) *gateway {
	t.Helper()
	bins := testutil.Build(t)
	g := &gateway{bus: dbustest.Start(t, busOpts)}
	cfgOpts.Bus = "system"
	toml, url := testutil.ConfigWith(t, strings.ReplaceAll(backends, "FAKE", bins.Fake), cfgOpts)
	conn, err := dbus.Connect(g.bus.Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	g.conn = conn
	g.client = dbusapi.NewClient(conn)
	if err := conn.AddMatchSignal(dbus.WithMatchSender(dbusapi.BusName)); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *dbus.Signal, 1000)
	conn.Signal(ch)
	go func() {
		for s := range ch {
			g.signals.Add(s)
		}
	}()
	g.daemon = testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: append([]string{"DBUS_SYSTEM_BUS_ADDRESS=" + g.bus.Address, "STATE_DIRECTORY=" + t.TempDir()}, env...)})
	return g
}

// mark returns the index of the next signal to arrive.
func (g *gateway) mark() int { return g.signals.Len() }

// signalsSince returns the signals received from index from on.
func (g *gateway) signalsSince(from int) []*dbus.Signal { return g.signals.All()[from:] }

// await waits for a signal at index from or later that satisfies match and
// returns its index.
func (g *gateway) await(t *testing.T, from int, what string, match func(*dbus.Signal) bool) int {
	t.Helper()
	var found int
	if !g.signals.Within(30*time.Second, testutil.Index(from, match, &found)) {
		t.Fatalf("timed out waiting for %s; signals: %s", what, describe(g.signals.All()))
	}
	return found
}

func describe(signals []*dbus.Signal) string {
	var b strings.Builder
	for _, s := range signals {
		fmt.Fprintf(&b, "\n  %s %s %v", s.Path, s.Name, s.Body)
	}
	return b.String()
}

// changed matches PropertiesChanged of the named backend's object whose
// changed properties satisfy cond.
func changed(name string, cond func(map[string]dbus.Variant) bool) func(*dbus.Signal) bool {
	return func(s *dbus.Signal) bool {
		if s.Path != dbusapi.BackendPath(name) || s.Name != "org.freedesktop.DBus.Properties.PropertiesChanged" || len(s.Body) != 3 {
			return false
		}
		props, ok := s.Body[1].(map[string]dbus.Variant)
		return ok && s.Body[0] == dbusapi.BackendInterface && cond(props)
	}
}

func is(prop string, want any) func(map[string]dbus.Variant) bool {
	return func(p map[string]dbus.Variant) bool {
		v, ok := p[prop]
		return ok && v.Value() == want
	}
}

// busctl runs busctl on the test's bus, as root or, with asUser, as
// nobody through setpriv.
func (g *gateway) busctl(t *testing.T, asNobody bool, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{"busctl", "--address=" + g.bus.Address}, args...)
	if asNobody {
		argv = append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...)
	}
	// Run waits for it: the process is reaped before busctl returns.
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func (g *gateway) mustBusctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := g.busctl(t, false, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// property reads a backend's property with busctl.
func (g *gateway) property(t *testing.T, backend, name string) string {
	t.Helper()
	out := g.mustBusctl(t, "get-property", dbusapi.BusName, string(dbusapi.BackendPath(backend)), dbusapi.BackendInterface, name)
	return strings.TrimSpace(out)
}

func (g *gateway) mainPID(t *testing.T, backend string) int {
	t.Helper()
	out := g.property(t, backend, "MainPID") // "u 1234"
	pid, err := strconv.Atoi(strings.TrimPrefix(out, "u "))
	if err != nil {
		t.Fatalf("MainPID of %s: %q", backend, out)
	}
	return pid
}

func ctx(t *testing.T) context.Context { return testutil.Context(t, 60*time.Second) }

func TestIntrospectionMatchesXML(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, "[backends.alpha]\ncommand = \"FAKE\"\n[backends.my-server]\ncommand = \"FAKE\"\n", "")
	manager, backend, err := dbusapi.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		iface introspect.Interface
	}{
		{string(dbusapi.ManagerPath), manager},
		{"/org/mcpgate/Gateway1/backend/alpha", backend},
		{"/org/mcpgate/Gateway1/backend/my_2dserver", backend},
	} {
		out := g.mustBusctl(t, "introspect", "--xml-interface", dbusapi.BusName, tc.path)
		var node introspect.Node
		if err := xml.Unmarshal([]byte(out), &node); err != nil {
			t.Fatalf("%s: %v\n%s", tc.path, err, out)
		}
		var names []string
		var got *introspect.Interface
		for i, iface := range node.Interfaces {
			names = append(names, iface.Name)
			if iface.Name == tc.iface.Name {
				got = &node.Interfaces[i]
			}
		}
		if want := []string{"org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Properties", tc.iface.Name}; !reflect.DeepEqual(names, want) {
			t.Errorf("%s: interfaces %v, want %v", tc.path, names, want)
		}
		if got == nil || !reflect.DeepEqual(*got, tc.iface) {
			t.Errorf("%s: exported %s differs from packaging/dbus/org.mcpgate.Gateway1.xml:\n%s", tc.path, tc.iface.Name, out)
		}
	}
	tree := g.mustBusctl(t, "tree", "--list", dbusapi.BusName)
	for _, path := range []string{"/org/mcpgate/Gateway1", "/org/mcpgate/Gateway1/backend/alpha", "/org/mcpgate/Gateway1/backend/my_2dserver"} {
		if !strings.Contains(tree, path+"\n") {
			t.Errorf("busctl tree lacks %s:\n%s", path, tree)
		}
	}
	// Peer works on every object, and the manager's properties read.
	g.mustBusctl(t, "call", dbusapi.BusName, "/org/mcpgate/Gateway1/backend/alpha", "org.freedesktop.DBus.Peer", "Ping")
	if out := g.mustBusctl(t, "get-property", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "NBackends", "NHealthyBackends"); out != "u 2\nu 2\n" {
		t.Errorf("NBackends, NHealthyBackends = %q, want u 2, u 2", out)
	}
}

func TestRestartBackendChangesMainPID(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, "[backends.alpha]\ncommand = \"FAKE\"\nargs = [\"--tools\", \"one,two\"]\n", "")
	before := g.mainPID(t, "alpha")
	if before == 0 {
		t.Fatal("alpha has no MainPID after READY=1")
	}
	if out := g.property(t, "alpha", "Tools"); out != `as 3 "alpha__one" "alpha__two" "alpha__echo"` && !strings.HasPrefix(out, "as ") {
		t.Errorf("Tools = %s", out)
	}
	from := g.mark()
	g.mustBusctl(t, "call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "RestartBackend", "s", "alpha")
	// RestartBackend returns after the new child's handshake, so the
	// signal that announced its PID has been sent already.
	i := g.await(t, from, "PropertiesChanged with alpha's new MainPID", changed("alpha", func(p map[string]dbus.Variant) bool {
		pid, ok := p["MainPID"].Value().(uint32)
		return ok && pid != 0 && int(pid) != before
	}))
	after := int(g.signalsSince(i)[0].Body[1].(map[string]dbus.Variant)["MainPID"].Value().(uint32))
	if got := g.mainPID(t, "alpha"); got != after {
		t.Errorf("MainPID property %d, signal said %d", got, after)
	}
	if testutil.State(before) != "" {
		t.Errorf("the old child %d is still there", before)
	}
	g.await(t, from, "PropertiesChanged with alpha healthy again", changed("alpha", is("State", "healthy")))
	if got := g.property(t, "alpha", "State"); got != `s "healthy"` {
		t.Errorf("State = %s after RestartBackend", got)
	}
	// PropertiesChanged only carries what changed: the stop's MainPID 0
	// and the new MainPID are separate announcements.
	for _, s := range g.signalsSince(from) {
		if props, ok := s.Body[1].(map[string]dbus.Variant); ok && s.Path == dbusapi.BackendPath("alpha") {
			if _, hasName := props["Name"]; hasName {
				t.Errorf("PropertiesChanged announced the constant Name: %v", props)
			}
		}
	}
}

// TestStopBackendStaysStopped stops a backend whose child dies by SIGKILL
// on the way (it ignores EOF and SIGTERM): to a careless supervisor that is
// a crash. Then a sibling goes through a whole crash-restart cycle, after
// which the stopped one must still be stopped and never have started.
// A stopped backend has no child to crash, so the other way to put Stop
// against the restart policy is to stop one that is waiting out its
// restart backoff after a crash: it must stay stopped, and Start must
// bring it back with its restart counter reset.
func TestStopBackendStaysStopped(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, `
[backends.alpha]
command = "FAKE"
args = ["--ignore-sigterm", "--ignore-eof"]
restart_backoff_initial = "30s"
restart_backoff_max = "30s"

[backends.beta]
command = "FAKE"
restart_backoff_initial = "100ms"
`, "shutdown_grace_period = \"200ms\"\n")
	cs := g.daemon.Connect(t, nil)
	callTool := func(name string) {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs.CallTool(c, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}) // crash never answers
	}

	from := g.mark()
	if err := g.client.StopBackend(ctx(t), "alpha"); err != nil {
		t.Fatal(err)
	}
	g.await(t, from, "alpha stopped", changed("alpha", is("State", "stopped")))
	if got := g.property(t, "alpha", "LastExitStatus"); got != "i 9" {
		t.Errorf("alpha's LastExitStatus = %s, want i 9: it ignored EOF and SIGTERM and was killed", got)
	}
	if got := g.property(t, "alpha", "LastExitCode"); got != `s "killed"` {
		t.Errorf("alpha's LastExitCode = %s, want s \"killed\": 9 is the signal, not an exit status", got)
	}

	betaPID := g.mainPID(t, "beta")
	crashed := g.mark()
	callTool("beta__crash")
	g.await(t, crashed, "beta restarting", changed("beta", is("NRestarts", uint32(1))))
	g.await(t, crashed, "beta healthy again", changed("beta", is("State", "healthy")))
	if pid := g.mainPID(t, "beta"); pid == betaPID || pid == 0 {
		t.Errorf("beta's MainPID %d after its crash-restart cycle, was %d", pid, betaPID)
	}
	for _, s := range g.signalsSince(from) {
		if changed("alpha", func(p map[string]dbus.Variant) bool {
			st, ok := p["State"]
			return ok && st.Value() != "stopped"
		})(s) {
			t.Errorf("stopped alpha changed state: %v", s.Body)
		}
	}
	for prop, want := range map[string]string{"State": `s "stopped"`, "MainPID": "u 0", "NRestarts": "u 0"} {
		if got := g.property(t, "alpha", prop); got != want {
			t.Errorf("alpha's %s = %s, want %s", prop, got, want)
		}
	}

	// Stop during the restart backoff.
	if err := g.client.StartBackend(ctx(t), "alpha"); err != nil {
		t.Fatal(err)
	}
	crashed = g.mark()
	callTool("alpha__crash")
	g.await(t, crashed, "alpha waiting to restart", changed("alpha", is("NRestarts", uint32(1))))
	if err := g.client.StopBackend(ctx(t), "alpha"); err != nil {
		t.Fatal(err)
	}
	for prop, want := range map[string]string{"State": `s "stopped"`, "MainPID": "u 0"} {
		if got := g.property(t, "alpha", prop); got != want {
			t.Errorf("after a stop in the backoff, alpha's %s = %s, want %s", prop, got, want)
		}
	}
	if err := g.client.StartBackend(ctx(t), "alpha"); err != nil {
		t.Fatal(err)
	}
	for prop, want := range map[string]string{"State": `s "healthy"`, "NRestarts": "u 0"} {
		if got := g.property(t, "alpha", prop); got != want {
			t.Errorf("after Start, alpha's %s = %s, want %s", prop, got, want)
		}
	}
}

func TestErrorsAndReload(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, `
[backends.alpha]
command = "FAKE"

[backends.broken]
command = "FAKE"
args = ["--exit-at-start", "3"]
max_restarts = 0
`, "")
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"StartBackend nosuch", g.client.StartBackend(ctx(t), "nosuch"), dbusapi.ErrorNoSuchBackend},
		{"GetBackend nosuch", func() error { _, err := g.client.Backend(ctx(t), "nosuch"); return err }(), dbusapi.ErrorNoSuchBackend},
		{"StartBackend broken", g.client.StartBackend(ctx(t), "broken"), dbusapi.ErrorFailed},
	} {
		if got := dbusapi.ErrorName(tc.err); got != tc.want {
			t.Errorf("%s: error %v (%s), want %s", tc.what, tc.err, got, tc.want)
		}
	}
	// busctl shows the message of the error.
	if _, err := g.busctl(t, false, "call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "StopBackend", "s", "nosuch"); err == nil || !strings.Contains(err.Error(), `no such backend "nosuch"`) {
		t.Errorf("busctl StopBackend nosuch: %v", err)
	}

	cfg, err := os.ReadFile(g.daemon.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(g.daemon.ConfigPath, append(append([]byte(nil), cfg...), "\n[backends.bad]\nargs = [1]\n"...), 0o644)
	err = g.client.Reload(ctx(t))
	if dbusapi.ErrorName(err) != dbusapi.ErrorInvalidConfig || !strings.Contains(err.Error(), filepath.Base(g.daemon.ConfigPath)+":") {
		t.Errorf("Reload of an invalid file: %v (%s), want %s with the parser's file:line", err, dbusapi.ErrorName(err), dbusapi.ErrorInvalidConfig)
	}
	// Status is the line sd_notify sent as STATUS=.
	if m, err := g.client.Manager(ctx(t)); err != nil || !strings.HasPrefix(m.Status, "reload failed: ") {
		t.Errorf("Status after a failed reload = %q, %v", m.Status, err)
	}

	bins := testutil.Build(t)
	os.WriteFile(g.daemon.ConfigPath, append(append([]byte(nil), cfg...), fmt.Sprintf("\n[backends.gamma]\ncommand = %q\n", bins.Fake)...), 0o644)
	from := g.mark()
	if err := g.client.Reload(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Reload returns once the new backend is started, not once its
	// handshake ended: its object is there at once, and PropertiesChanged
	// says when it is healthy.
	if _, err := g.client.Backend(ctx(t), "gamma"); err != nil {
		t.Errorf("gamma right after Reload: %v", err)
	}
	g.await(t, from, "BackendNew gamma", func(s *dbus.Signal) bool {
		return s.Name == dbusapi.ManagerInterface+".BackendNew" && reflect.DeepEqual(s.Body, []any{"gamma", dbusapi.BackendPath("gamma")})
	})
	g.await(t, from, "PropertiesChanged with gamma healthy", changed("gamma", is("State", "healthy")))

	os.WriteFile(g.daemon.ConfigPath, cfg, 0o644)
	from = g.mark()
	if err := g.client.Reload(ctx(t)); err != nil {
		t.Fatal(err)
	}
	g.await(t, from, "BackendRemoved gamma", func(s *dbus.Signal) bool {
		return s.Name == dbusapi.ManagerInterface+".BackendRemoved" && reflect.DeepEqual(s.Body, []any{"gamma", dbusapi.BackendPath("gamma")})
	})
	if _, err := g.client.Backend(ctx(t), "gamma"); dbusapi.ErrorName(err) != dbusapi.ErrorNoSuchBackend {
		t.Errorf("removed gamma: %v", err)
	}
}

// TestSystemBusPolicy runs the gateway on a bus with the system bus's
// default policy and the shipped policy file. Real polkit is not on that
// bus, so callers other than root are denied every change, as they are on
// a system without polkit.
func TestSystemBusPolicy(t *testing.T) {
	if os.Getuid() != 0 {
		testutil.Unavailable(t, "needs root: the gateway must own its name under the shipped policy, and setpriv must switch to nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		testutil.Unavailable(t, "setpriv is not installed")
	}
	policy := filepath.Join(testutil.ModuleRoot(), "packaging", "dbus", "org.mcpgate.Gateway1.conf")
	g := startGateway(t, dbustest.Options{System: true, Include: []string{policy}}, "[backends.alpha]\ncommand = \"FAKE\"\n", "")
	manager := []string{"call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface}

	before := g.mainPID(t, "alpha")
	g.mustBusctl(t, append(manager, "RestartBackend", "s", "alpha")...)
	if after := g.mainPID(t, "alpha"); after == before {
		t.Errorf("RestartBackend as root left MainPID at %d", after)
	}

	_, err := g.busctl(t, true, append(manager, "RestartBackend", "s", "alpha")...)
	if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), "polkit") {
		t.Errorf("RestartBackend as nobody: %v, want access denied (polkit absent)", err)
	}
	for _, args := range [][]string{
		{"get-property", dbusapi.BusName, string(dbusapi.BackendPath("alpha")), dbusapi.BackendInterface, "State"},
		append(manager, "ListTools"),
		{"introspect", dbusapi.BusName, string(dbusapi.ManagerPath)},
	} {
		if out, err := g.busctl(t, true, args...); err != nil {
			t.Errorf("as nobody: %v", err)
		} else if args[0] == "get-property" && strings.TrimSpace(out) != `s "healthy"` {
			t.Errorf("State as nobody = %q", out)
		}
	}
	_, err = g.busctl(t, true, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName", "su", dbusapi.BusName, "4")
	if err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Errorf("nobody asking for %s: %v, want refused by the policy", dbusapi.BusName, err)
	}
	if errors.Is(err, exec.ErrNotFound) {
		t.Fatal(err)
	}
}

// TestStartupWithoutBus: an unreachable bus costs the control interface
// only; the gateway starts and serves.
func TestStartupWithoutBus(t *testing.T) {
	bins := testutil.Build(t)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf("[backends.alpha]\ncommand = %q\n", bins.Fake), testutil.ConfigOptions{Bus: "system"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(t.TempDir(), "no-bus")}})
	if out := d.Stderr.String(); !strings.Contains(out, "running without the D-Bus control interface") {
		t.Errorf("no warning about the missing bus in:\n%s", out)
	}
	d.Connect(t, nil)
}

// TestStartupNameTaken: a second gateway on the same bus refuses to start.
func TestStartupNameTaken(t *testing.T) {
	bins := testutil.Build(t)
	bus := dbustest.Start(t, dbustest.Options{})
	squatter, err := dbus.Connect(bus.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	if reply, err := squatter.RequestName(dbusapi.BusName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v %v", reply, err)
	}
	toml, url := testutil.ConfigWith(t, fmt.Sprintf("[backends.alpha]\ncommand = %q\n", bins.Fake), testutil.ConfigOptions{Bus: "system"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true, Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address}})
	select {
	case <-d.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("mcpgated kept running although another process owns " + dbusapi.BusName)
	}
	if code := d.Cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if out := d.Stderr.String(); !strings.Contains(out, "owned by another process (pid "+strconv.Itoa(os.Getpid())+"); is another mcpgated running?") {
		t.Errorf("no clear message in:\n%s", out)
	}
	for _, m := range d.Notify.Messages() {
		if strings.Contains(m, "READY=1") {
			t.Errorf("sent READY=1 before failing: %q", m)
		}
	}
}
