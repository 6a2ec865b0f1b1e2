package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

const (
	// envDeb names a .deb to install instead of building one with `make
	// deb`; a relative path is taken from the top of the checkout, as in
	// `make e2e MCPGATE_DEB=dist/mcpgate_1.0_amd64.deb`.
	envDeb = "MCPGATE_DEB"

	// budget is how long the whole test may take once the root is cached.
	budget = 5 * time.Minute

	gatewayURL = "http://127.0.0.1:7431/mcp"
	busName    = "org.mcpgate.Gateway1"
	busPath    = "/org/mcpgate/Gateway1"
	managerIf  = "org.mcpgate.Gateway1.Manager"
	backendIf  = "org.mcpgate.Gateway1.Backend"
	// accessDenied is the D-Bus error of a caller who may not change the
	// gateway.
	accessDenied = "org.mcpgate.Gateway1.Error.AccessDenied"

	// fakeBin is where the fake server goes in the container.
	fakeBin = "/usr/local/bin/fakeserver"
	// fakeHandshakeDelay keeps the fake backend in its handshake long
	// enough to watch the service activating meanwhile; every start of the
	// gateway waits for it.
	fakeHandshakeDelay = 2 * time.Second
	// fakeStartLine is what the fake backend writes to stderr as it starts.
	fakeStartLine = "fake backend starting"

	// Message IDs systemd writes about units (systemd's catalog).
	sdUnitStarted = "39f53479d3a045ac8e11786248231fbf"
	sdUnitResult  = "d9b373ed55a64feb8242e02dbe79a49c" // "Failed with result …", with UNIT_RESULT=

	// testWatchdog is the watchdog timeout of step 7's drop-in.
	testWatchdog = 3 * time.Second
)

// backendsConfig is step 2's drop-in: the fake server, slow to finish its
// handshake, and the npm server installed by mkroot.sh. Both run as the
// mcpgate user under the unit's sandbox: this test covers runner =
// "process", TestBackendUnits the package's default, "unit".
var backendsConfig = fmt.Sprintf(`# Written by internal/e2e (TestInstalledPackage).
[gateway]
runner = "process"

[backends.fake]
command = %q
args = ["--name", "fake", "--handshake-delay", %q, "--stderr-at-start", %q]

[backends.everything]
command = "/usr/local/bin/mcp-server-everything"
args = ["stdio"]
`, fakeBin, fakeHandshakeDelay.String(), fakeStartLine)

// addedConfig is step 6's drop-in, a backend added by a reload.
var addedConfig = fmt.Sprintf(`# Written by internal/e2e (TestInstalledPackage).
[backends.added]
command = %q
args = ["--name", "added"]
`, fakeBin)

// polkitRule grants org.mcpgate.Gateway1.manage to group mcpgate-admin, as
// mcpgate-dbus(7) shows.
const polkitRule = `polkit.addRule(function(action, subject) {
    if (action.id == "org.mcpgate.Gateway1.manage" &&
        subject.isInGroup("mcpgate-admin")) {
        return polkit.Result.YES;
    }
});
`

// TestInstalledPackage is issue 7's end-to-end test. It builds the .deb
// (`make deb`, or takes $MCPGATE_DEB), boots the cached Debian root in its
// own network namespace, installs the package with dpkg and checks, in
// order, that under the container's systemd it behaves as the units, the
// D-Bus interface and the maintainer scripts promise, from installation to
// purge. Each step logs one line with its time; a failed step ends the run,
// since every step builds on the state the one before left.
func TestInstalledPackage(t *testing.T) {
	Require(t)
	r := &runReport{t: t, start: time.Now()}
	t.Cleanup(r.summary)

	begin := time.Now()
	deb, how := packageToInstall(t)
	r.add("deb", "ok", time.Since(begin), how+": "+filepath.Base(deb))

	begin = time.Now()
	fake := buildStatic(t, "github.com/mcpgate/mcpgate/internal/testing/fakeserver", "fakeserver")
	r.add("fakeserver", "ok", time.Since(begin), "static build of internal/testing/fakeserver")

	root := PrepareRoot(t)
	how = "cached"
	if !root.Cached {
		how = "built now (not counted against the budget)"
		r.exempt = root.Elapsed
	}
	r.add("root", "ok", root.Elapsed, how+": "+root.Dir)

	begin = time.Now()
	c := Boot(t, Config{Root: root.Dir})
	r.add("boot", "ok", time.Since(begin), fmt.Sprintf("%s, init PID %d", c.Name(), c.InitPID()))

	g := &installedGateway{c: c}
	// Runs before Boot's cleanup stops the container.
	t.Cleanup(g.closeClient)

	begin = time.Now()
	c.CopyFile(t, deb, "/root/"+filepath.Base(deb), 0o644)
	c.CopyFile(t, fake, fakeBin, 0o755)
	r.add("copy-in", "ok", time.Since(begin), "the .deb to /root, the fake server to "+fakeBin)
	g.deb = "/root/" + filepath.Base(deb)

	r.step("1-install", g.checkInstall)
	r.step("2-first-client", g.checkFirstClient)
	r.step("3-dbus-restart", g.checkDBusRestart)
	r.step("4-journal-fields", g.checkJournalFields)
	r.step("5-kill-backend", g.checkKillBackend)
	r.step("6-reload", g.checkReload)
	r.step("6b-requires-unit", g.checkRequiresUnit)
	r.step("7-watchdog", g.checkWatchdog)
	r.step("8-stop", g.checkStop)
	r.step("9-upgrade", g.checkUpgrade)
	r.step("9b-idle-host", g.checkIdleHost)
	r.step("10-purge", g.checkPurge)
}

// runReport collects one line per step and prints them all at the end.
type runReport struct {
	t      *testing.T
	start  time.Time
	lines  []string
	failed bool
	// exempt is time that does not count against the budget (building
	// the root when it was not cached).
	exempt time.Duration
}

func (r *runReport) add(name, status string, took time.Duration, detail string) {
	line := fmt.Sprintf("%-17s %-4s %6.2fs  %s", name, status, took.Seconds(), detail)
	r.lines = append(r.lines, line)
	r.t.Log(line)
}

// step runs check as a subtest, unless an earlier step failed, and reports
// it in one line.
func (r *runReport) step(name string, check func(t *testing.T) string) {
	if r.failed {
		r.add(name, "skip", 0, "an earlier step failed")
		return
	}
	start := time.Now()
	var detail string
	status := "ok"
	if !r.t.Run(name, func(t *testing.T) { detail = check(t) }) {
		status, r.failed = "FAIL", true
	}
	r.add(name, status, time.Since(start), detail)
}

func (r *runReport) summary() {
	total := time.Since(r.start)
	verdict := fmt.Sprintf("within the %v budget", budget)
	if counted := total - r.exempt; counted > budget {
		verdict = fmt.Sprintf("OVER the %v budget", budget)
		if !r.t.Failed() {
			r.t.Errorf("the run took %v (%v without building the root), more than %v", total.Round(time.Second), counted.Round(time.Second), budget)
		}
	}
	r.t.Logf("summary (total %v, %s; the container's teardown follows):\n  %s",
		total.Round(time.Millisecond), verdict, strings.Join(r.lines, "\n  "))
}

// bootInstalled is how the container tests of one capability start: the
// .deb (packageToInstall) and the static fake server built, the cached
// root booted, both copied in (the package as g.deb, /root/mcpgate.deb;
// the fake server as fakeBin), not yet installed. It returns the run's
// report, the gateway, and the host path of the .deb, beside which make
// deb leaves the other packages.
func bootInstalled(t *testing.T) (r *runReport, g *installedGateway, deb string) {
	r = &runReport{t: t, start: time.Now()}
	t.Cleanup(r.summary)
	begin := time.Now()
	deb, how := packageToInstall(t)
	fake := buildStatic(t, "github.com/mcpgate/mcpgate/internal/testing/fakeserver", "fakeserver")
	r.add("build", "ok", time.Since(begin), how+": "+deb)
	root := PrepareRoot(t)
	if !root.Cached {
		r.exempt = root.Elapsed
	}
	begin = time.Now()
	c := Boot(t, Config{Root: root.Dir})
	r.add("boot", "ok", time.Since(begin), c.Name())
	g = &installedGateway{c: c}
	t.Cleanup(g.closeClient) // before Boot's cleanup stops the container
	c.CopyFile(t, deb, "/root/mcpgate.deb", 0o644)
	c.CopyFile(t, fake, fakeBin, 0o755)
	g.deb = "/root/mcpgate.deb"
	return r, g, deb
}

// packageToInstall returns the .deb named by $MCPGATE_DEB, or builds one
// with `make deb` into a temporary directory.
func packageToInstall(t *testing.T) (path, how string) {
	if p := os.Getenv(envDeb); p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(testutil.ModuleRoot(), p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$%s: %v", envDeb, err)
		}
		return p, "$" + envDeb
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "deb",
		"DIST="+dir, "RELEASE="+filepath.Join(dir, "release"))
	cmd.Dir = testutil.ModuleRoot()
	// A make that runs `go test` (make e2e) passes its jobserver in
	// MAKEFLAGS; its descriptors are not ours to use.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make deb: %v; end of its output:\n%s", err, lastLines(string(out), 30))
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "mcpgate_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb DIST=%s made %v, want one mcpgate_*.deb; end of its output:\n%s", dir, debs, lastLines(string(out), 10))
	}
	return debs[0], "make deb"
}

// buildStatic builds the main package pkg without cgo, so that it runs in
// the container whatever its libc, and returns the binary's path.
func buildStatic(t *testing.T, pkg, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// installedGateway is the state the steps hand on to each other.
type installedGateway struct {
	c      *Container
	deb    string             // the package's path in the container
	client *mcp.ClientSession // the current MCP session, or nil
	files  []string           // dpkg -L before removal
	token  string             // the bearer token made by mcpgatectl token create
}

// closeClient ends the MCP session, if any. Closing sends DELETE to the
// gateway, which socket activation would start again: only close while it
// runs, or once its socket is gone.
func (g *installedGateway) closeClient() {
	if g.client != nil {
		g.client.Close()
		g.client = nil
	}
}

// checkInstall: after `dpkg -i`, mcpgate.socket is enabled and listening
// and mcpgate.service is not running.
func (g *installedGateway) checkInstall(t *testing.T) string {
	c := g.c
	res, err := c.Exec(t.Context(), nil, "dpkg", "-i", g.deb)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	for _, w := range []string{"warning", "error"} {
		if strings.Contains(strings.ToLower(res.Stdout+res.Stderr), w) {
			t.Errorf("dpkg -i printed a %s:\n%s%s", w, res.Stdout, res.Stderr)
		}
	}
	sock := g.show(t, "mcpgate.socket", "ActiveState", "SubState", "UnitFileState")
	if sock["ActiveState"] != "active" || sock["SubState"] != "listening" || sock["UnitFileState"] != "enabled" {
		t.Errorf("mcpgate.socket is %v, want active, listening and enabled", sock)
	}
	svc := g.show(t, "mcpgate.service", "ActiveState", "MainPID", "UnitFileState")
	if svc["ActiveState"] != "inactive" || svc["MainPID"] != "0" {
		t.Errorf("mcpgate.service is %v, want inactive with no MainPID", svc)
	}
	// PID 1 holds the TCP socket; the unix socket lives in /run/mcpgate.
	listener := c.Run(t, "ss", "--no-header", "--listening", "--tcp", "--numeric", "--processes", "sport = :7431")
	if !strings.Contains(listener, "127.0.0.1:7431") || !strings.Contains(listener, `"systemd",pid=1,`) {
		t.Errorf("127.0.0.1:7431 is not held by PID 1 (systemd): %q", listener)
	}
	unix := c.Run(t, "stat", "--format=%F %U:%G %a", "/run/mcpgate/mcpgate.sock")
	if unix != "socket root:mcpgate 660" {
		t.Errorf("/run/mcpgate/mcpgate.sock is %q, want socket root:mcpgate 660", unix)
	}
	user := c.Run(t, "id", "mcpgate")
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("dpkg -i in %v; socket %s/%s (%s), 127.0.0.1:7431 held by PID 1, /run/mcpgate/mcpgate.sock %s; service %s; %s",
		res.Elapsed.Round(time.Millisecond), sock["ActiveState"], sock["SubState"], sock["UnitFileState"], unix,
		svc["ActiveState"], user)
}

// stateSample is one reading of a unit's ActiveState.
type stateSample struct {
	from, to time.Time // when the query was sent and when it was answered
	state    string
}

// checkFirstClient: with two backends configured, the first MCP client
// starts the service, which becomes active only after both backends
// finished their handshake; the client sees and calls both backends' tools.
func (g *installedGateway) checkFirstClient(t *testing.T) string {
	c := g.c
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e.toml", []byte(backendsConfig), 0o644)
	// The packaged configuration lets only root and group mcpgate in, on the
	// unix socket; the test's client comes over TCP with a token of its own.
	g.token = c.Run(t, "mcpgatectl", "token", "create", "e2e")
	check := c.Run(t, "runuser", "-u", "mcpgate", "--", "mcpgated", "--check-config")
	if state := g.activeState(t); state != "inactive" {
		t.Fatalf("mcpgate.service is %s before any client, want inactive", state)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// Watch ActiveState while the first client connects; the watcher stops
	// when it reads "active" (or at the deadline).
	samples := make(chan []stateSample, 1)
	go func() { samples <- sampleActiveState(ctx, c, "mcpgate.service", "active", 100*time.Millisecond) }()
	start := time.Now()
	cs, err := g.connect(ctx)
	connected := time.Since(start)
	if err != nil {
		cancel()
		<-samples
		t.Fatalf("first MCP client: %v", err)
	}
	g.client = cs
	seen := <-samples
	if n := len(seen); n == 0 || seen[n-1].state != "active" {
		t.Fatalf("mcpgate.service never read active; readings: %s", formatSamples(seen))
	}

	// The order, from the journal: each backend's handshake, then the
	// gateway's READY (its "ready" entry), then systemd's "Started".
	entries := g.journal(t, "--unit=mcpgate.service")
	spawned := map[string]JournalEntry{}
	ready := map[string]JournalEntry{}
	var gatewayReady, started JournalEntry
	for _, e := range entries {
		switch e["MESSAGE_ID"] {
		case journal.MessageSpawn.String():
			spawned[e["MCPGATE_BACKEND"]] = e
		case journal.MessageBackendReady.String():
			ready[e["MCPGATE_BACKEND"]] = e
		case journal.MessageReady.String():
			gatewayReady = e
		case sdUnitStarted:
			started = e
		}
	}
	if gatewayReady == nil || started == nil {
		t.Fatalf("the journal lacks the gateway's ready entry (%v) or systemd's Started entry (%v)", gatewayReady != nil, started != nil)
	}
	var lastReady time.Time
	for _, name := range []string{"fake", "everything"} {
		e := ready[name]
		if e == nil || spawned[name] == nil {
			t.Fatalf("the journal lacks backend %s's spawn or ready entry", name)
		}
		if monotonic(e) >= monotonic(gatewayReady) || monotonic(e) >= monotonic(started) {
			t.Errorf("backend %s's ready entry (%d µs) is not before the gateway's ready entry (%d µs) and systemd's Started (%d µs)",
				name, monotonic(e), monotonic(gatewayReady), monotonic(started))
		}
		if realtime(e).After(lastReady) {
			lastReady = realtime(e)
		}
	}
	// ActiveState was "activating" while the fake backend was in its
	// handshake, and never "active" before the last handshake ended.
	fakeFrom, fakeTo := realtime(spawned["fake"]), realtime(ready["fake"])
	activating := 0
	for _, s := range seen {
		if s.state == "activating" && s.from.After(fakeFrom) && s.to.Before(fakeTo) {
			activating++
		}
		if s.state == "active" && s.to.Before(lastReady) {
			t.Errorf("ActiveState read active at %s, before the last backend finished its handshake at %s",
				s.to.Format(time.StampMicro), lastReady.Format(time.StampMicro))
		}
	}
	if activating == 0 {
		t.Errorf("no reading of ActiveState=activating while the fake backend was in its handshake (%s … %s); readings: %s",
			fakeFrom.Format(time.StampMicro), fakeTo.Format(time.StampMicro), formatSamples(seen))
	}

	// The client lists and calls tools of both backends.
	tools := toolNames(t, cs)
	for _, want := range []string{"fake__echo", "everything__echo", "everything__get-sum"} {
		if !slices.Contains(tools, want) {
			t.Fatalf("tools/list lacks %s: %v", want, tools)
		}
	}
	if got := callText(t, cs, "fake__echo", map[string]any{"text": "hello from e2e"}); got != "hello from e2e" {
		t.Errorf("fake__echo answered %q", got)
	}
	if got := callText(t, cs, "everything__get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(got, "5") {
		t.Errorf("everything__get-sum 2+3 answered %q", got)
	}

	// Issue 3's caveat: Node 18 needs pkey_* under @system-service. The
	// npm server answering above ran under the shipped unit; show that it
	// really was filtered and unprivileged.
	node := g.backendPID(t, "everything")
	status := parseColonFields(c.Run(t, "cat", fmt.Sprintf("/proc/%d/status", node)))
	comm := c.Run(t, "cat", fmt.Sprintf("/proc/%d/comm", node))
	uid := c.Run(t, "id", "-u", "mcpgate")
	if comm != "node" || status["Seccomp"] != "2" || status["NoNewPrivs"] != "1" || strings.Fields(status["Uid"])[0] != uid {
		t.Errorf("backend everything (PID %d) is %q with Seccomp %q, NoNewPrivs %q, Uid %q; want node under a seccomp filter, no new privileges, uid %s (mcpgate)",
			node, comm, status["Seccomp"], status["NoNewPrivs"], status["Uid"], uid)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("%s; first client connected in %v; activating for %d readings during fake's %v handshake, active after both (%d tools); %s under the unit's seccomp filter as uid %s",
		check, connected.Round(time.Millisecond), activating, fakeHandshakeDelay, len(tools), c.Run(t, "node", "--version"), uid)
}

// checkDBusRestart: RestartBackend as root replaces the backend's process;
// an unprivileged user may read but not restart.
func (g *installedGateway) checkDBusRestart(t *testing.T) string {
	c := g.c
	before := g.backendPID(t, "fake")
	res, err := c.Exec(t.Context(), nil, "busctl", "call", busName, busPath, managerIf, "RestartBackend", "s", "fake")
	if err != nil {
		t.Fatal(err)
	}
	after := g.backendPID(t, "fake")
	if after == 0 || after == before {
		t.Fatalf("fake's MainPID is %d after RestartBackend, was %d", after, before)
	}
	if g.alive(t, before) {
		t.Errorf("fake's old process %d still runs after RestartBackend", before)
	}

	// nobody, through both tools, is denied; reading works.
	nobody := func(args ...string) []string {
		return append([]string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"}, args...)
	}
	denied, err := c.Exec(t.Context(), nil, nobody("dbus-send", "--system", "--print-reply", "--dest="+busName,
		busPath, managerIf+".RestartBackend", "string:fake")...)
	if err == nil || !strings.Contains(denied.Stderr, accessDenied) {
		t.Errorf("RestartBackend as nobody: %v, stderr %q; want %s", err, denied.Stderr, accessDenied)
	}
	// Denied by polkit's answer, not because polkit refused to answer the
	// gateway (it does unless the action names mcpgate as an owner).
	if strings.Contains(denied.Stderr, "could not be asked") {
		t.Errorf("mcpgated could not ask polkit about nobody: %s", strings.TrimSpace(denied.Stderr))
	}
	ctl, _ := c.Exec(t.Context(), nil, nobody("mcpgatectl", "--no-ask-password", "restart", "fake")...)
	if ctl.ExitCode != 4 {
		t.Errorf("mcpgatectl restart fake as nobody exited %d, want 4 (access denied); stderr %q", ctl.ExitCode, ctl.Stderr)
	}
	read := c.Run(t, nobody("busctl", "get-property", busName, backendPath("fake"), backendIf, "MainPID")...)
	if read != fmt.Sprintf("u %d", after) {
		t.Errorf("MainPID read as nobody is %q, want u %d: the denied calls changed something", read, after)
	}
	list := c.Run(t, nobody("busctl", "call", busName, busPath, managerIf, "ListBackends")...)
	status := c.Run(t, nobody("mcpgatectl", "status")...)
	if !strings.Contains(list, `"fake"`) || !strings.Contains(status, "fake") {
		t.Errorf("reads as nobody: ListBackends %q, mcpgatectl status %q", list, status)
	}

	// The grant mcpgate-dbus(7) documents: a polkit rule for a group.
	c.Run(t, "groupadd", "--system", "mcpgate-admin")
	c.Run(t, "useradd", "--system", "--no-create-home", "--groups=mcpgate-admin", "e2e-admin")
	c.WriteFile(t, "/etc/polkit-1/rules.d/50-mcpgate.rules", []byte(polkitRule), 0o644)
	c.Run(t, "systemctl", "restart", "polkit.service") // reads the rules before it answers again
	node := g.backendPID(t, "everything")
	granted, err := c.Exec(t.Context(), nil, "setpriv", "--reuid=e2e-admin", "--regid=e2e-admin", "--init-groups", "--",
		"busctl", "call", busName, busPath, managerIf, "RestartBackend", "s", "everything")
	if err != nil {
		t.Errorf("RestartBackend as e2e-admin, a member of mcpgate-admin: %v", err)
	} else if now := g.backendPID(t, "everything"); now == node {
		t.Errorf("RestartBackend as e2e-admin left everything's MainPID at %d", now)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("RestartBackend fake as root: MainPID %d → %d in %v; as nobody: %s (%s), mcpgatectl exit 4; reads work; a member of mcpgate-admin granted by a polkit rule restarted everything in %v",
		before, after, res.Elapsed.Round(time.Millisecond), accessDenied, firstLine(strings.TrimPrefix(denied.Stderr, "Error "+accessDenied+": ")),
		granted.Elapsed.Round(time.Millisecond))
}

// checkJournalFields: a backend's stderr lines are journal entries of the
// unit with the backend's fields.
func (g *installedGateway) checkJournalFields(t *testing.T) string {
	c := g.c
	pid := strconv.Itoa(g.backendPID(t, "fake"))
	prefix := "ERROR: e2e " + randomHex(4)
	if got := callText(t, g.client, "fake__stderr_spam", map[string]any{"lines": 3, "prefix": prefix}); got == "" {
		t.Fatal("fake__stderr_spam gave no answer")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	last := prefix + " 2"
	if _, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return e["MESSAGE"] == last },
		"--unit=mcpgate.service", "MCPGATE_BACKEND=fake"); err != nil {
		t.Fatal(err)
	}

	// The query as an operator types it.
	res, err := c.Exec(t.Context(), nil, "journalctl", "-u", "mcpgate", "MCPGATE_BACKEND=fake", "-o", "json", "--no-pager")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // MESSAGE → PRIORITY
		fakeStartLine: "6", // no level word: info
		prefix + " 0": "3", // "ERROR:": err
		prefix + " 1": "3",
		prefix + " 2": "3",
	}
	found := map[string]bool{}
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(res.Stdout), "\n") {
		e, err := parseJournalEntry([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		n++
		if e["MCPGATE_BACKEND"] != "fake" || e["_SYSTEMD_UNIT"] != "mcpgate.service" {
			t.Errorf("journalctl -u mcpgate MCPGATE_BACKEND=fake printed an entry of %q in unit %q", e["MCPGATE_BACKEND"], e["_SYSTEMD_UNIT"])
		}
		prio, ok := want[e["MESSAGE"]]
		if !ok || e["MCPGATE_BACKEND_PID"] != pid {
			continue // another process's lines, or the gateway's own entries
		}
		found[e["MESSAGE"]] = true
		if e["SYSLOG_IDENTIFIER"] != "mcpgate-fake" || e["PRIORITY"] != prio {
			t.Errorf("stderr line %q: SYSLOG_IDENTIFIER=%q PRIORITY=%q, want mcpgate-fake and %s",
				e["MESSAGE"], e["SYSLOG_IDENTIFIER"], e["PRIORITY"], prio)
		}
	}
	for msg := range want {
		if !found[msg] {
			t.Errorf("no entry %q with MCPGATE_BACKEND_PID=%s among the %d entries", msg, pid, n)
		}
	}
	logs := c.Run(t, "mcpgatectl", "logs", "fake", "--lines=3")
	if !strings.Contains(logs, last) {
		t.Errorf("mcpgatectl logs fake -n 3 lacks %q:\n%s", last, logs)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("%d entries for fake; its stderr lines have SYSLOG_IDENTIFIER=mcpgate-fake, MCPGATE_BACKEND_PID=%s, PRIORITY 6 (plain) and 3 (\"ERROR:\"); mcpgatectl logs shows them", n, pid)
}

// checkKillBackend: a backend killed with SIGKILL is restarted, and its
// death is in the journal.
func (g *installedGateway) checkKillBackend(t *testing.T) string {
	c := g.c
	mainPID := g.mainPID(t)
	old := g.backendPID(t, "everything")
	restarts := g.backendProp(t, "everything", "NRestarts")
	killed := time.Now()
	c.Run(t, "kill", "-9", strconv.Itoa(old))

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	exit, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return e["MCPGATE_BACKEND_PID"] == strconv.Itoa(old) },
		"--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageExit.String(), "MCPGATE_BACKEND=everything")
	if err != nil {
		t.Fatal(err)
	}
	if exit["MCPGATE_EXIT_CODE"] != "killed" || exit["MCPGATE_SIGNAL"] != "SIGKILL" || exit["MCPGATE_EXIT_STATUS"] != "9" || exit["PRIORITY"] != "4" {
		t.Errorf("exit entry: %q with MCPGATE_EXIT_CODE=%q MCPGATE_SIGNAL=%q MCPGATE_EXIT_STATUS=%q PRIORITY=%q; want killed, SIGKILL, 9, 4",
			exit["MESSAGE"], exit["MCPGATE_EXIT_CODE"], exit["MCPGATE_SIGNAL"], exit["MCPGATE_EXIT_STATUS"], exit["PRIORITY"])
	}
	ready, err := c.AwaitJournal(ctx, func(e JournalEntry) bool {
		return e["MCPGATE_BACKEND_PID"] != strconv.Itoa(old) && realtime(e).After(killed)
	}, "--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageBackendReady.String(), "MCPGATE_BACKEND=everything")
	if err != nil {
		t.Fatal(err)
	}
	restartedIn := realtime(ready).Sub(killed)
	now := g.backendPID(t, "everything")
	if strconv.Itoa(now) != ready["MCPGATE_BACKEND_PID"] || now == old {
		t.Errorf("everything's MainPID is %d, the ready entry says %s, the killed one was %d", now, ready["MCPGATE_BACKEND_PID"], old)
	}
	if got := g.backendProp(t, "everything", "NRestarts"); got != restarts+1 {
		t.Errorf("everything's NRestarts is %d, was %d before the kill", got, restarts)
	}
	if got := g.mainPID(t); got != mainPID {
		t.Errorf("mcpgated's MainPID changed from %d to %d", mainPID, got)
	}
	if got := callText(t, g.client, "everything__echo", map[string]any{"message": "after restart"}); !strings.Contains(got, "after restart") {
		t.Errorf("everything__echo after the restart answered %q", got)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("kill -9 of node %d: exit entry (%s, MCPGATE_SIGNAL=SIGKILL), healthy again as %d after %v; NRestarts %d; tools answer",
		old, journal.MessageExit, now, restartedIn.Round(time.Millisecond), restarts+1)
}

// checkWatchdog: a frozen mcpgated is killed by systemd's watchdog and
// restarted.
func (g *installedGateway) checkWatchdog(t *testing.T) string {
	c := g.c
	c.WriteFile(t, "/etc/systemd/system/mcpgate.service.d/e2e-watchdog.conf",
		fmt.Appendf(nil, "# Written by internal/e2e (TestInstalledPackage).\n[Service]\nWatchdogSec=%ds\n", int(testWatchdog.Seconds())), 0o644)
	c.Run(t, "systemctl", "daemon-reload")
	// mcpgated learns its interval from WATCHDOG_USEC at start.
	restart, err := c.Exec(t.Context(), nil, "systemctl", "restart", "mcpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	g.closeClient() // its session died with the old process; the new one says 404
	props := g.show(t, "mcpgate.service", "MainPID", "NRestarts", "WatchdogUSec")
	if props["WatchdogUSec"] != testWatchdog.String() {
		t.Fatalf("WatchdogUSec is %q after the drop-in, want %v", props["WatchdogUSec"], testWatchdog)
	}
	frozen, _ := strconv.Atoi(props["MainPID"])
	nrestarts, _ := strconv.Atoi(props["NRestarts"])
	procs := g.cgroupProcs(t)

	// A healthy mcpgated keeps the watchdog fed: systemd records two
	// WATCHDOG=1 in a row, so the restart below is the freeze's doing.
	ctx, cancel := context.WithTimeout(t.Context(), 4*testWatchdog)
	defer cancel()
	pings := 0
	last := ""
	pingStart := time.Now()
	for pings < 2 {
		ts := g.show(t, "mcpgate.service", "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
		if last != "" && ts != last {
			pings++
		}
		last = ts
		select {
		case <-ctx.Done():
			t.Fatalf("systemd saw %d WATCHDOG=1 from mcpgated in %v", pings, 4*testWatchdog)
		case <-time.After(testWatchdog / 6):
		}
	}

	pinged := time.Since(pingStart)
	c.Run(t, "kill", "-STOP", strconv.Itoa(frozen))
	frozenAt := time.Now()
	ctx, cancel = context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	result, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return realtime(e).After(frozenAt) },
		"--unit=mcpgate.service", "MESSAGE_ID="+sdUnitResult)
	if err != nil {
		t.Fatal(err)
	}
	if result["UNIT_RESULT"] != "watchdog" {
		t.Fatalf("systemd says mcpgate.service failed with %q (%q), want watchdog", result["UNIT_RESULT"], result["MESSAGE"])
	}
	started, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return realtime(e).After(frozenAt) },
		"--unit=mcpgate.service", "MESSAGE_ID="+sdUnitStarted)
	if err != nil {
		t.Fatal(err)
	}
	after := g.show(t, "mcpgate.service", "MainPID", "NRestarts", "ActiveState")
	if after["ActiveState"] != "active" || after["MainPID"] == props["MainPID"] || after["NRestarts"] != strconv.Itoa(nrestarts+1) {
		t.Errorf("after the watchdog: %v, want active with a new MainPID and NRestarts %d", after, nrestarts+1)
	}
	for _, pid := range procs {
		if g.alive(t, pid) {
			t.Errorf("process %d of the frozen instance still runs", pid)
		}
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("restart with WatchdogSec=%v in %v, 2 pings seen in %v; SIGSTOP of %d → UNIT_RESULT=watchdog after %v, active again as %s after %v (NRestarts %s); the frozen instance's %d processes are gone",
		testWatchdog, restart.Elapsed.Round(time.Millisecond), pinged.Round(time.Millisecond), frozen,
		realtime(result).Sub(frozenAt).Round(time.Millisecond), after["MainPID"],
		realtime(started).Sub(frozenAt).Round(time.Millisecond), after["NRestarts"], len(procs))
}

// checkStop: `systemctl stop` empties the service's cgroup within
// TimeoutStopSec, without systemd killing leftovers, and the socket stays
// to start the service again.
func (g *installedGateway) checkStop(t *testing.T) string {
	c := g.c
	procs := g.cgroupProcs(t)
	if len(procs) != 4 {
		t.Errorf("the service's cgroup holds %v, want mcpgated and three backends", procs)
	}
	limit, err := parseSystemdDuration(g.show(t, "mcpgate.service", "TimeoutStopUSec")["TimeoutStopUSec"])
	if err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	res, err := c.Exec(t.Context(), nil, "systemctl", "stop", "mcpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	if res.Elapsed >= limit {
		t.Errorf("systemctl stop took %v, TimeoutStopSec is %v", res.Elapsed, limit)
	}
	props := g.show(t, "mcpgate.service", "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
	if props["ActiveState"] != "inactive" || props["Result"] != "success" || props["ExecMainCode"] != "1" || props["ExecMainStatus"] != "0" {
		t.Errorf("after stop mcpgate.service is %v, want inactive, success, exited with 0", props)
	}
	left := c.Run(t, "sh", "-c", "cat /sys/fs/cgroup/system.slice/mcpgate.service/cgroup.procs 2>/dev/null || true")
	if left != "" {
		t.Errorf("the service's cgroup still holds %q", left)
	}
	for _, pid := range procs {
		if g.alive(t, pid) {
			t.Errorf("process %d of the service still runs", pid)
		}
	}
	// mcpgated stopped its backends itself: systemd had nothing to kill.
	for _, e := range g.journal(t, "--unit=mcpgate.service") {
		if e["_PID"] == "1" && realtime(e).After(stopAt) && strings.Contains(e["MESSAGE"], "Killing process") {
			t.Errorf("systemd had to kill a leftover: %s", e["MESSAGE"])
		}
	}
	if state := c.Run(t, "systemctl", "show", "--property=ActiveState", "--value", "mcpgate.socket"); state != "active" {
		t.Fatalf("mcpgate.socket is %s after stopping the service, want active", state)
	}

	// The socket starts the service again for the next client.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := time.Now()
	cs, err := g.connect(ctx)
	if err != nil {
		t.Fatalf("MCP client after the stop: %v", err)
	}
	g.client = cs
	again := time.Since(start)
	g.awaitReady(t) // the client is served before every backend is
	tools := toolNames(t, cs)
	state := g.activeState(t)
	g.closeClient() // while the service runs (see closeClient)
	if state != "active" || !slices.Contains(tools, "everything__echo") {
		t.Errorf("after the next client the service is %s with tools %v", state, tools)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("systemctl stop in %v (TimeoutStopSec %v): %d processes gone, cgroup empty, no SIGKILL by systemd; socket active; the next client started it again in %v",
		res.Elapsed.Round(time.Millisecond), limit, len(procs), again.Round(time.Millisecond))
}

// checkUpgrade: installing the package over itself runs postinst as an
// upgrade, which reloads the running service: mcpgated finds the new
// binary and re-executes it in place (mcpgated(8), UPGRADES, RELOADS AND
// RESTARTS). The main PID stays, now running the new file; the backends
// keep their processes and are taken over without a new handshake; the
// administrator's configuration stays and the socket keeps listening.
func (g *installedGateway) checkUpgrade(t *testing.T) string {
	c := g.c
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs, err := g.connect(ctx) // the service runs while the package is upgraded
	if err != nil {
		t.Fatalf("MCP client before the upgrade: %v", err)
	}
	g.client = cs
	g.awaitReady(t)
	before := g.mainPID(t)
	g.closeClient()
	if before == 0 {
		t.Fatal("mcpgate.service is not running before the upgrade")
	}
	backends := map[string]int{}
	for _, name := range []string{"fake", "everything"} {
		backends[name] = g.backendPID(t, name)
	}
	confd := c.Run(t, "ls", "/etc/mcpgate/conf.d")
	cursor := c.Run(t, "journalctl", "--show-cursor", "-n", "0", "--quiet")
	// Through the upgrade: a 2025 session (its SDK reconnects its stream),
	// a slow call in flight, and a stateless client calling in a loop.
	session, err := g.connectReconnecting(ctx)
	if err != nil {
		t.Fatalf("MCP session before the upgrade: %v", err)
	}
	defer session.Close()
	slow := make(chan error, 1)
	go func() {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "fake__slow", Arguments: map[string]any{"ms": 3000}})
		if err == nil && (res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "slept 3000 ms") {
			err = fmt.Errorf("answered %+v", res)
		}
		slow <- err
	}()
	stopLoop := make(chan struct{})
	loop := make(chan statelessLoop, 1)
	go func() { loop <- g.statelessLoop(ctx, stopLoop) }()
	begin := time.Now()
	res, err := c.Exec(t.Context(), nil, "dpkg", "--force-confold", "-i", g.deb)
	if err != nil {
		t.Fatalf("dpkg -i over the installed package: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	noDpkgWarning(t, "dpkg -i over the installed package", res)
	took := time.Since(begin)
	if err := <-slow; err != nil {
		t.Errorf("the slow call in flight during the upgrade: %v", err)
	}
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "after"}}); err != nil {
		t.Errorf("the session's call after the upgrade: %v; want it answered without a new initialize", err)
	}
	close(stopLoop)
	calls := <-loop
	if len(calls.errs) > 0 || calls.ok == 0 {
		t.Errorf("the stateless loop across the upgrade: %d answered, %d errors, the first: %v", calls.ok, len(calls.errs), calls.errs)
	}
	after := g.mainPID(t)
	if after != before {
		t.Errorf("MainPID %d before the upgrade, %d after; want the same: the upgrade re-executes mcpgated in place", before, after)
	}
	if exe := c.Run(t, "readlink", fmt.Sprintf("/proc/%d/exe", after)); exe != "/usr/bin/mcpgated" {
		t.Errorf("mcpgated runs %q after the upgrade, want the new /usr/bin/mcpgated", exe)
	}
	for name, pid := range backends {
		if got := g.backendPID(t, name); got != pid {
			t.Errorf("backend %s: pid %d before the upgrade, %d after; want it taken over, not restarted", name, pid, got)
		}
	}
	var names []string
	for name := range backends {
		names = append(names, name)
	}
	adopted, handshakes := g.takenOver(t, cursor, names)
	for _, msg := range handshakes {
		t.Errorf("a backend made a new handshake during the upgrade: %s", msg)
	}
	for name := range backends {
		if !adopted[name] {
			t.Errorf("the journal has no entry of backend %s taken over during the upgrade", name)
		}
	}
	if state := g.activeState(t); state != "active" {
		t.Errorf("mcpgate.service is %s after the upgrade", state)
	}
	if state := c.Run(t, "systemctl", "show", "--property=ActiveState", "--value", "mcpgate.socket"); state != "active" {
		t.Errorf("mcpgate.socket is %s after the upgrade", state)
	}
	if got := c.Run(t, "ls", "/etc/mcpgate/conf.d"); got != confd {
		t.Errorf("conf.d holds %q after the upgrade, %q before", got, confd)
	}
	cs, err = g.connect(ctx)
	if err != nil {
		t.Fatalf("MCP client after the upgrade: %v", err)
	}
	g.client = cs
	tools := toolNames(t, cs)
	g.closeClient()
	if !slices.Contains(tools, "everything__echo") {
		t.Errorf("after the upgrade the tools are %v", tools)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("dpkg -i over itself in %v re-executed mcpgated in place (MainPID %d kept, now the new binary); backends %v taken over without a handshake; "+
		"the slow call answered once, the 2025 session went on, the stateless loop made %d calls without an error; configuration kept; socket active",
		took.Round(time.Millisecond), after, backends, calls.ok)
}

// connectReconnecting is connect with the SDK's reconnection of its event
// stream, as a client that outlives a network blip.
func (g *installedGateway) connectReconnecting(ctx context.Context) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-e2e", Version: "1"}, nil)
	hc := g.c.HTTPClient()
	hc.Transport = bearerTransport{token: g.token, next: hc.Transport}
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gatewayURL, HTTPClient: hc}, testutil.LegacySession())
}

// statelessLoop is what a stateless client calling in a loop saw.
type statelessLoop struct {
	ok   int
	errs []error
}

// statelessLoop makes 2026-07-28 tools/call requests of fake__echo, each
// on a connection of its own, until stop is closed.
func (g *installedGateway) statelessLoop(ctx context.Context, stop <-chan struct{}) statelessLoop {
	tr := g.c.transport.Clone()
	tr.DisableKeepAlives = true
	hc := &http.Client{Transport: bearerTransport{token: g.token, next: tr}, Timeout: time.Minute}
	var out statelessLoop
	for n := 0; ; n++ {
		select {
		case <-stop:
			return out
		default:
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fake__echo","arguments":{"text":"loop"},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, n)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL, strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "fake__echo"} {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			out.errs = append(out.errs, err)
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"loop"`) || strings.Contains(string(data), `"error"`) {
			out.errs = append(out.errs, fmt.Errorf("HTTP %d %v: %s", resp.StatusCode, err, data))
			continue
		}
		out.ok++
	}
}

// checkPurge: removing keeps the configuration and stops everything;
// purging leaves nothing of the package but the system user, as postrm
// promises.
func (g *installedGateway) checkPurge(t *testing.T) string {
	c := g.c
	// The test's own drop-in is the administrator's file, not the package's.
	c.Run(t, "rm", "-r", "/etc/systemd/system/mcpgate.service.d")
	c.Run(t, "systemctl", "daemon-reload")
	files := strings.Split(c.Run(t, "dpkg-query", "--listfiles", "mcpgate"), "\n")
	for _, dir := range []string{"/var/lib/mcpgate", "/var/cache/mcpgate"} {
		c.Run(t, "test", "-d", dir) // made by the service; purge must take them
	}

	removeAt := time.Now()
	res, err := c.Exec(t.Context(), nil, "dpkg", "--remove", "mcpgate")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	noDpkgWarning(t, "dpkg --remove", res)
	removed := time.Since(removeAt)
	for _, unit := range []string{"mcpgate.socket", "mcpgate.service"} {
		if state := c.Run(t, "systemctl", "show", "--property=ActiveState", "--value", unit); state == "active" {
			t.Errorf("%s is still active after dpkg --remove", unit)
		}
	}
	if procs, _ := c.Exec(t.Context(), nil, "pgrep", "-u", "mcpgate"); strings.TrimSpace(procs.Stdout) != "" {
		t.Errorf("processes of user mcpgate after dpkg --remove: %s", procs.Stdout)
	}
	c.Run(t, "test", "-f", "/etc/mcpgate/mcpgate.toml") // conffiles stay until purge

	purgeAt := time.Now()
	res, err = c.Exec(t.Context(), nil, "dpkg", "--purge", "mcpgate")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	noDpkgWarning(t, "dpkg --purge", res)
	purged := time.Since(purgeAt)
	if res, _ := c.Exec(t.Context(), nil, "dpkg-query", "--show", "mcpgate"); res.ExitCode == 0 {
		t.Errorf("dpkg still knows mcpgate after the purge: %s", res.Stdout)
	}
	// What dpkg listed is gone, but for directories other packages own.
	if left := c.RunInput(t, strings.Join(files, "\n")+"\n", "sh", "-c", leftoverFiles); left != "" {
		t.Errorf("left after the purge:\n%s", left)
	}
	// Configuration, state, cache and runtime directories go too (postrm).
	const gone = `for p in /etc/mcpgate /var/lib/mcpgate /var/cache/mcpgate /run/mcpgate; do [ -e "$p" ] && echo "$p"; done
find /etc/systemd /var/lib/systemd /run/systemd/system -name '*mcpgate*' 2>/dev/null
true`
	if left := c.Run(t, "sh", "-c", gone); left != "" {
		t.Errorf("left after the purge:\n%s", left)
	}
	units := g.show(t, "mcpgate.socket", "LoadState")["LoadState"] + "/" + g.show(t, "mcpgate.service", "LoadState")["LoadState"]
	if units != "not-found/not-found" {
		t.Errorf("after the purge systemd still loads the units: socket/service %s", units)
	}
	if l := c.Run(t, "ss", "--no-header", "--listening", "--tcp", "--numeric", "sport = :7431"); l != "" {
		t.Errorf("something still listens on port 7431: %s", l)
	}
	// postrm keeps the system user (a reused id would inherit its files).
	user := c.Run(t, "id", "mcpgate")
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("dpkg --remove in %v (conffiles kept, units stopped); dpkg --purge in %v: %d listed paths gone (shared directories stay), /etc/mcpgate, /var/lib/mcpgate, /var/cache/mcpgate, /run/mcpgate gone, units not-found, port free; user kept: %s",
		removed.Round(time.Millisecond), purged.Round(time.Millisecond), len(files), user)
}

// leftoverFiles reads the paths a package listed, one a line, and prints
// those that are still there, but for directories other packages own.
const leftoverFiles = `while IFS= read -r p; do
	[ "$p" = /. ] && continue
	[ -e "$p" ] || [ -L "$p" ] || continue
	[ -d "$p" ] && dpkg-query --search "$p" >/dev/null 2>&1 && continue
	echo "$p"
done`

// noDpkgWarning fails the test if dpkg's output res says "warning" (such
// as "directory … not empty so not removed").
func noDpkgWarning(t *testing.T, what string, res Result) {
	t.Helper()
	if out := res.Stdout + res.Stderr; strings.Contains(strings.ToLower(out), "warning") {
		t.Errorf("%s printed a warning:\n%s", what, out)
	}
}

// show returns the unit's properties.
func (g *installedGateway) show(t *testing.T, unit string, props ...string) map[string]string {
	t.Helper()
	return parseProperties(g.c.Run(t, "systemctl", "show", unit, "--property="+strings.Join(props, ",")))
}

func (g *installedGateway) activeState(t *testing.T) string {
	t.Helper()
	return activeState(t, g.c, "mcpgate.service")
}

// mainPID returns mcpgate.service's MainPID.
func (g *installedGateway) mainPID(t *testing.T) int {
	t.Helper()
	pid, err := strconv.Atoi(g.show(t, "mcpgate.service", "MainPID")["MainPID"])
	if err != nil || pid == 0 {
		t.Fatalf("mcpgate.service has no MainPID (%v)", err)
	}
	return pid
}

// backendPath returns the D-Bus object path of the backend name; the
// names used here need no escaping.
func backendPath(name string) string { return busPath + "/backend/" + name }

// backendProp reads an integer property of a backend object.
func (g *installedGateway) backendProp(t *testing.T, name, prop string) int {
	t.Helper()
	out := g.c.Run(t, "busctl", "get-property", busName, backendPath(name), backendIf, prop)
	_, value, _ := strings.Cut(out, " ") // "u 123"
	n, err := strconv.Atoi(value)
	if err != nil {
		t.Fatalf("%s's %s is %q: %v", name, prop, out, err)
	}
	return n
}

// backendPID returns the backend's MainPID as the D-Bus interface says.
func (g *installedGateway) backendPID(t *testing.T, name string) int {
	t.Helper()
	return g.backendProp(t, name, "MainPID")
}

// alive reports whether pid runs in the container.
func (g *installedGateway) alive(t *testing.T, pid int) bool {
	t.Helper()
	res, err := g.c.Exec(t.Context(), nil, "test", "-e", fmt.Sprintf("/proc/%d", pid))
	return err == nil && res.ExitCode == 0
}

// cgroupProcs lists the processes in mcpgate.service's cgroup.
func (g *installedGateway) cgroupProcs(t *testing.T) []int {
	t.Helper()
	var pids []int
	for f := range strings.FieldsSeq(g.c.Run(t, "cat", "/sys/fs/cgroup/system.slice/mcpgate.service/cgroup.procs")) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("cgroup.procs: %v", err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// journal returns the journal entries of this boot that match args.
// takenOver reads the gateway's journal after cursor (journalctl
// --show-cursor's output) until each of names has its entry of being
// taken over across a re-exec, or 30s pass: journald may store the new
// image's entries after its READY=1. It returns the backends taken over,
// and the new handshakes journaled meanwhile, by backend.
func (g *installedGateway) takenOver(t *testing.T, cursor string, names []string) (adopted map[string]bool, handshakes map[string]string) {
	t.Helper()
	_, since, _ := strings.Cut(cursor, "-- cursor: ")
	testutil.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		adopted, handshakes = map[string]bool{}, map[string]string{}
		for _, e := range g.journal(t, "--after-cursor="+strings.TrimSpace(since), "-u", "mcpgate.service") {
			switch e["MESSAGE_ID"] {
			case "d60f254cb8234020a75192aa09de951f":
				adopted[e["MCPGATE_BACKEND"]] = true
			case "458c1b16ec2944c2b4cd97d3702f5d3b":
				handshakes[e["MCPGATE_BACKEND"]] = e["MESSAGE"]
			}
		}
		for _, name := range names {
			if !adopted[name] {
				return false
			}
		}
		return true
	})
	return adopted, handshakes
}

func (g *installedGateway) journal(t *testing.T, args ...string) []JournalEntry {
	t.Helper()
	entries, err := g.c.Journal(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// sampleActiveState reads unit's ActiveState every interval until it reads
// until or ctx ends, and returns the readings.
func sampleActiveState(ctx context.Context, c *Container, unit, until string, interval time.Duration) []stateSample {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var samples []stateSample
	for {
		from := time.Now()
		res, err := c.Exec(ctx, nil, "systemctl", "show", "--property=ActiveState", "--value", unit)
		if err == nil {
			s := stateSample{from: from, to: time.Now(), state: strings.TrimSpace(res.Stdout)}
			samples = append(samples, s)
			if s.state == until {
				return samples
			}
		}
		select {
		case <-ctx.Done():
			return samples
		case <-tick.C:
		}
	}
}

// formatSamples renders readings for failure messages, one per change.
func formatSamples(samples []stateSample) string {
	var parts []string
	for i, s := range samples {
		if i == 0 || s.state != samples[i-1].state {
			parts = append(parts, s.from.Format(time.StampMilli)+" "+s.state)
		}
	}
	return fmt.Sprintf("%d readings: %s", len(samples), strings.Join(parts, ", "))
}

// connect opens an MCP session with the gateway in the container, with
// the token checkFirstClient made.
func (g *installedGateway) connect(ctx context.Context) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-e2e", Version: "1"}, nil)
	hc := g.c.HTTPClient()
	hc.Transport = bearerTransport{token: g.token, next: hc.Transport}
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gatewayURL, HTTPClient: hc, MaxRetries: -1}, testutil.LegacySession())
}

// bearerTransport sends a bearer token with every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// toolNames lists every tool the gateway offers.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// callText calls a tool and returns its text content; an error result
// fails the test.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := callTool(t, cs, name, args)
	if res.IsError {
		t.Fatalf("tools/call %s: error result %q", name, contentText(res))
	}
	return contentText(res)
}

// callTool calls a tool; a failed call fails the test, an error result
// does not.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// contentText joins the text content of a result.
func contentText(res *mcp.CallToolResult) string {
	var text []string
	for _, content := range res.Content {
		if tc, ok := content.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n")
}

// statusLineHealthy reports whether mcpgatectl status lists backend name
// as healthy.
func statusLineHealthy(status, name string) bool {
	for line := range strings.SplitSeq(status, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == name && f[2] == "healthy" {
			return true
		}
	}
	return false
}

// realtime returns when the journal received the entry.
func realtime(e JournalEntry) time.Time {
	us, _ := strconv.ParseInt(e["__REALTIME_TIMESTAMP"], 10, 64)
	return time.UnixMicro(us)
}

// monotonic returns the entry's CLOCK_MONOTONIC time in µs, which orders
// the entries of one boot.
func monotonic(e JournalEntry) uint64 {
	us, _ := strconv.ParseUint(e["__MONOTONIC_TIMESTAMP"], 10, 64)
	return us
}

// parseColonFields parses "Key:\tvalue" lines such as /proc/PID/status.
func parseColonFields(s string) map[string]string {
	fields := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// parseSystemdDuration parses a time span as systemctl show prints it,
// such as "30s" or "1min 30s".
func parseSystemdDuration(s string) (time.Duration, error) {
	var total time.Duration
	for part := range strings.FieldsSeq(s) {
		d, err := time.ParseDuration(strings.Replace(part, "min", "m", 1))
		if err != nil {
			return 0, fmt.Errorf("time span %q: %w", s, err)
		}
		total += d
	}
	return total, nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
