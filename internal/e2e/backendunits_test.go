package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// unitsConfig is TestBackendUnits' drop-in: three backends under the
// packaged runner = "unit", two of them with a secret in their environment
// that the other must not read, one with limits, one cut off the network
// by an operator's drop-in (unitsDropIn).
var unitsConfig = fmt.Sprintf(`# Written by internal/e2e (TestBackendUnits).
[backends.everything]
command = "/usr/local/bin/mcp-server-everything"
args = ["stdio"]

[backends.fake]
command = %[1]q
args = ["--name", "fake", "--stderr-at-start", "fake unit starting"]
env = { FAKE_SECRET = "fake-only" }
memory_max = "256M"
memory_high = "200M"
tasks_max = 64
cpu_weight = 50
cpu_quota = "150%%"
io_weight = 300

[backends.isolated]
command = %[1]q
args = ["--name", "isolated"]
env = { ISOLATED_SECRET = "isolated-only" }

[backends.pooled]
command = %[1]q
args = ["--name", "pooled"]
instance = "session"
pool_min_idle = 1
pool_max = 2
`, fakeBin)

// unitsDropIn is what an operator writes with
// `systemctl edit mcpgate-backend@isolated.service`.
const unitsDropIn = "# Written by internal/e2e (TestBackendUnits).\n[Service]\nPrivateNetwork=yes\n"

// dummyUnit is a unit polkit must not let user mcpgate start.
const dummyUnit = "# Written by internal/e2e (TestBackendUnits).\n[Service]\nType=oneshot\nExecStart=/bin/true\n"

// TestBackendUnits is issue 15's end-to-end test: with the package
// installed and its configuration's runner = "unit", every backend is a
// systemd service of its own, mcpgate-backend@NAME.service.
func TestBackendUnits(t *testing.T) {
	Require(t)
	r, g, _ := bootInstalled(t)
	u := &unitsCheck{g: g}

	r.step("u1-start", u.checkStart)
	r.step("u2-uids", u.checkUIDs)
	r.step("u3-limits", u.checkLimits)
	r.step("u3b-limits-removed", u.checkLimitsRemoved)
	r.step("u4-drop-in", u.checkDropIn)
	r.step("u5-journal", u.checkJournal)
	r.step("u6-setsid", u.checkSetsid)
	r.step("u6b-reexec", u.checkReexec)
	r.step("u7-restart", u.checkRestart)
	r.step("u8-crash", u.checkCrash)
	r.step("u9-polkit", u.checkPolkit)
	r.step("u9b-template", u.checkTemplate)
	r.step("u9c-socket", u.checkSocket)
	r.step("u10-stop", u.checkStopAll)
}

type unitsCheck struct {
	g    *installedGateway
	pids map[string]int
}

func unitOf(name string) string { return "mcpgate-backend@" + name + ".service" }

// checkStart: the first client starts the gateway, which starts one unit
// per backend; each unit's MainPID is the backend's server.
func (u *unitsCheck) checkStart(t *testing.T) string {
	g, c := u.g, u.g.c
	res, err := c.Exec(t.Context(), nil, "dpkg", "-i", g.deb)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, res.Stdout, res.Stderr)
	}
	c.WriteFile(t, "/etc/mcpgate/conf.d/units.toml", []byte(unitsConfig), 0o644)
	c.WriteFile(t, "/etc/systemd/system/"+unitOf("isolated")+".d/e2e.conf", []byte(unitsDropIn), 0o644)
	c.Run(t, "systemctl", "daemon-reload")
	g.token = c.Run(t, "mcpgatectl", "token", "create", "e2e")
	check := c.Run(t, "runuser", "-u", "mcpgate", "--", "mcpgated", "--check-config")

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs, err := g.connect(ctx)
	if err != nil {
		t.Fatalf("first MCP client: %v", err)
	}
	g.client = cs
	g.awaitReady(t) // the client is served before every backend is
	u.pids = map[string]int{}
	for _, name := range []string{"everything", "fake", "isolated"} {
		props := g.show(t, unitOf(name), "ActiveState", "MainPID", "User", "DynamicUser")
		pid := g.backendPID(t, name)
		if props["ActiveState"] != "active" || props["MainPID"] != strconv.Itoa(pid) || props["DynamicUser"] != "yes" || props["User"] != "mcpgate-"+name {
			t.Errorf("%s is %v, want active with MainPID %d (the backend's on D-Bus) as dynamic user mcpgate-%s", unitOf(name), props, pid, name)
		}
		if got := c.Run(t, "busctl", "get-property", busName, backendPath(name), backendIf, "Unit"); got != fmt.Sprintf("s %q", unitOf(name)) {
			t.Errorf("%s's Unit property is %s", name, got)
		}
		u.pids[name] = pid
	}
	// A pool's instance N runs as NAME-N; the pool itself has no unit.
	if state := g.show(t, unitOf("pooled-1"), "ActiveState")["ActiveState"]; state != "active" {
		t.Errorf("%s is %s, want active (the pool's idle instance)", unitOf("pooled-1"), state)
	}
	if got := c.Run(t, "busctl", "get-property", busName, backendPath("pooled"), backendIf, "Unit"); got != `s ""` {
		t.Errorf("the pool's Unit property is %s, want empty", got)
	}
	if status, err := c.Exec(t.Context(), nil, "systemctl", "status", unitOf("everything")); err != nil || !strings.Contains(status.Stdout, "Active: active (running)") {
		t.Errorf("systemctl status %s: %v\n%s", unitOf("everything"), err, status.Stdout)
	}
	ctl := c.Run(t, "mcpgatectl", "status", "fake")
	if !strings.Contains(ctl, "Unit: "+unitOf("fake")) {
		t.Errorf("mcpgatectl status fake does not show its unit:\n%s", ctl)
	}
	if got := callText(t, cs, "everything__get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(got, "5") {
		t.Errorf("everything__get-sum 2+3 answered %q", got)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("%s; 3 units active, MainPIDs %v as on D-Bus, mcpgatectl status shows the unit", check, u.pids)
}

// checkUIDs: each backend runs under its own dynamic uid, neither
// mcpgate's nor another backend's, and cannot read another's environment.
func (u *unitsCheck) checkUIDs(t *testing.T) string {
	g, c := u.g, u.g.c
	uid := func(pid int) string {
		return strings.Fields(parseColonFields(c.Run(t, "cat", fmt.Sprintf("/proc/%d/status", pid)))["Uid"])[0]
	}
	fake, isolated, gateway := uid(u.pids["fake"]), uid(u.pids["isolated"]), c.Run(t, "id", "-u", "mcpgate")
	if fake == isolated || fake == gateway || isolated == gateway || fake == "0" || isolated == "0" {
		t.Fatalf("uids: fake %s, isolated %s, mcpgated %s; want three different, none root", fake, isolated, gateway)
	}
	// The secret is there (root reads it), and the other backend's user
	// cannot read it, in either direction.
	if env := c.Run(t, "cat", fmt.Sprintf("/proc/%d/environ", u.pids["isolated"])); !strings.Contains(env, "ISOLATED_SECRET=isolated-only") {
		t.Fatalf("isolated's environment lacks its secret")
	}
	var refusals []string
	for _, pair := range [][2]string{{"fake", "isolated"}, {"isolated", "fake"}} {
		as, other := uid(u.pids[pair[0]]), u.pids[pair[1]]
		res, err := c.Exec(t.Context(), nil, "setpriv", "--reuid="+as, "--regid="+as, "--clear-groups", "--",
			"cat", fmt.Sprintf("/proc/%d/environ", other))
		if err == nil && res.ExitCode == 0 {
			t.Errorf("uid %s (%s) read the environment of %s (PID %d)", as, pair[0], pair[1], other)
		}
		refusals = append(refusals, firstLine(strings.TrimSpace(res.Stderr)))
	}
	if t.Failed() {
		return ""
	}
	_ = g
	return fmt.Sprintf("uids fake %s, isolated %s, mcpgated %s; reading each other's environ: %s", fake, isolated, gateway, strings.Join(refusals, "; "))
}

// checkLimits: fake's limits are its unit's properties. Whether the kernel
// enforces them depends on the host's cgroup v2 controllers.
func (u *unitsCheck) checkLimits(t *testing.T) string {
	g, c := u.g, u.g.c
	props := g.show(t, unitOf("fake"), "MemoryMax", "MemoryHigh", "TasksMax", "CPUWeight", "CPUQuotaPerSecUSec", "IOWeight")
	want := map[string]string{"MemoryMax": "268435456", "MemoryHigh": "209715200", "TasksMax": "64", "CPUWeight": "50", "CPUQuotaPerSecUSec": "1.500000s", "IOWeight": "300"}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s's %s is %q, want %q", unitOf("fake"), k, props[k], v)
		}
	}
	if other := g.show(t, unitOf("isolated"), "MemoryMax")["MemoryMax"]; other != "infinity" {
		t.Errorf("isolated, which sets no memory_max, has MemoryMax=%s", other)
	}
	enforced := "not run: the container's cgroup v2 has no memory controller (a property of this host), so no OOM kill can be shown"
	if controllers := c.Run(t, "cat", "/sys/fs/cgroup/cgroup.controllers"); strings.Contains(controllers, "memory") {
		enforced = u.oomKill(t)
	}
	t.Log("enforcement: " + enforced)
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("%s has %v; enforcement %s", unitOf("fake"), props, enforced)
}

// oomKill makes fake allocate past its memory_max (256M) and checks that
// the kernel's OOM kill is reported as such and fake restarted.
func (u *unitsCheck) oomKill(t *testing.T) string {
	g, c := u.g, u.g.c
	old := g.backendPID(t, "fake")
	if max := c.Run(t, "cat", "/sys/fs/cgroup/system.slice/system-mcpgate\\x2dbackend.slice/"+unitOf("fake")+"/memory.max"); max != "268435456" {
		t.Errorf("memory.max of %s is %q", unitOf("fake"), max)
	}
	killed := time.Now()
	if res := callTool(t, g.client, "fake__allocate", map[string]any{"mib": 512}); !res.IsError {
		t.Errorf("fake allocated 512 MiB past its memory_max: %s", contentText(res))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	oom, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return e["MCPGATE_BACKEND_PID"] == strconv.Itoa(old) },
		"--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageOOM.String(), "MCPGATE_BACKEND=fake")
	if err != nil {
		t.Fatal(err)
	}
	if oom["MCPGATE_REASON"] != "oom" || oom["MCPGATE_UNIT"] != unitOf("fake") {
		t.Errorf("OOM entry %q: MCPGATE_REASON=%q MCPGATE_UNIT=%q", oom["MESSAGE"], oom["MCPGATE_REASON"], oom["MCPGATE_UNIT"])
	}
	if _, err := c.AwaitJournal(ctx, func(e JournalEntry) bool {
		return realtime(e).After(killed) && e["MCPGATE_BACKEND_PID"] != strconv.Itoa(old)
	},
		"--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageBackendReady.String(), "MCPGATE_BACKEND=fake"); err != nil {
		t.Fatal(err)
	}
	u.pids["fake"] = g.backendPID(t, "fake")
	return fmt.Sprintf("fake (PID %d) allocating 512 MiB was OOM-killed, journaled with reason oom, restarted as %d", old, u.pids["fake"])
}

// checkLimitsRemoved: a reload that drops fake's limits restarts it
// without them; systemd would keep runtime properties until reboot.
func (u *unitsCheck) checkLimitsRemoved(t *testing.T) string {
	g, c := u.g, u.g.c
	before := g.backendPID(t, "fake")
	var kept []string
	for line := range strings.SplitSeq(unitsConfig, "\n") {
		if k, _, _ := strings.Cut(line, " = "); strings.HasSuffix(k, "_max") || strings.HasSuffix(k, "_high") || strings.HasSuffix(k, "_weight") || k == "cpu_quota" {
			continue
		}
		kept = append(kept, line)
	}
	c.WriteFile(t, "/etc/mcpgate/conf.d/units.toml", []byte(strings.Join(kept, "\n")), 0o644)
	reloadAt := time.Now()
	c.Run(t, "systemctl", "reload", "mcpgate")
	// The reload does not wait for fake's new handshake.
	g.awaitBackendReady(t, "fake", reloadAt)
	after := g.backendPID(t, "fake")
	if after == before {
		t.Fatalf("fake was not restarted by the reload that changed its limits (PID %d)", after)
	}
	props := g.show(t, unitOf("fake"), "MemoryMax", "MemoryHigh", "TasksMax", "CPUWeight", "CPUQuotaPerSecUSec", "IOWeight")
	defaultTasks := c.Run(t, "systemctl", "show", "--property=DefaultTasksMax", "--value")
	want := map[string]string{"MemoryMax": "infinity", "MemoryHigh": "infinity", "TasksMax": defaultTasks, "CPUWeight": "[not set]", "CPUQuotaPerSecUSec": "infinity", "IOWeight": "[not set]"}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("after the limits were removed, %s's %s is %q, want %q", unitOf("fake"), k, props[k], v)
		}
	}
	if t.Failed() {
		return ""
	}
	u.pids["fake"] = after
	return fmt.Sprintf("reload restarted fake (%d → %d) with %v", before, after, props)
}

// checkDropIn: an operator's drop-in with PrivateNetwork=yes cuts isolated
// off the network while fake still reaches it.
func (u *unitsCheck) checkDropIn(t *testing.T) string {
	g := u.g
	if got := g.show(t, unitOf("isolated"), "PrivateNetwork")["PrivateNetwork"]; got != "yes" {
		t.Fatalf("%s has PrivateNetwork=%s despite the drop-in", unitOf("isolated"), got)
	}
	args := map[string]any{"address": "127.0.0.1:7431"}
	reached := callText(t, g.client, "fake__dial", args)
	res := callTool(t, g.client, "isolated__dial", args)
	if !res.IsError {
		t.Errorf("isolated reached 127.0.0.1:7431 despite PrivateNetwork=yes")
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("fake: %s; isolated: %s", reached, contentText(res))
}

// checkJournal: the backends' stderr is in the journal with their fields.
func (u *unitsCheck) checkJournal(t *testing.T) string {
	g, c := u.g, u.g.c
	var lines []string
	for _, name := range []string{"everything", "fake"} {
		res, err := c.Exec(t.Context(), nil, "journalctl", "MCPGATE_BACKEND="+name, "SYSLOG_IDENTIFIER=mcpgate-"+name, "-o", "cat", "--no-pager")
		if err != nil || strings.TrimSpace(res.Stdout) == "" {
			t.Errorf("journalctl MCPGATE_BACKEND=%s shows no stderr line: %v", name, err)
			continue
		}
		lines = append(lines, name+": "+firstLine(res.Stdout))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "fake unit starting") {
		t.Errorf("fake's start line is not in the journal: %q", lines)
	}
	_ = g
	return strings.Join(lines, "; ")
}

// checkSetsid: a grandchild that left the process group with setsid is
// gone once the backend is stopped.
func (u *unitsCheck) checkSetsid(t *testing.T) string {
	g, c := u.g, u.g.c
	res := callTool(t, g.client, "fake__spawn_grandchild", map[string]any{"setsid": true})
	if res.IsError {
		t.Fatalf("spawn_grandchild: %s", contentText(res))
	}
	grandchild := int(res.StructuredContent.(map[string]any)["pid"].(float64))
	if !g.alive(t, grandchild) {
		t.Fatalf("grandchild %d is not running", grandchild)
	}
	stop := c.Run(t, "mcpgatectl", "stop", "fake")
	if g.alive(t, grandchild) {
		t.Errorf("the setsid grandchild %d survived mcpgatectl stop fake", grandchild)
	}
	if state := g.show(t, unitOf("fake"), "ActiveState")["ActiveState"]; state != "inactive" {
		t.Errorf("%s is %s after mcpgatectl stop", unitOf("fake"), state)
	}
	c.Run(t, "mcpgatectl", "start", "fake")
	u.pids["fake"] = g.backendPID(t, "fake")
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("grandchild %d in a session of its own; mcpgatectl stop fake (%s) left nothing; started again as %d", grandchild, stop, u.pids["fake"])
}

// checkReexec: a reload that finds a new /usr/bin/mcpgated re-executes it
// in place (the package's upgrade does this): the backend units keep
// running, the same run with the same MainPID, and the new image takes
// each over without a new handshake; the pool's instance is started again.
func (u *unitsCheck) checkReexec(t *testing.T) string {
	g, c := u.g, u.g.c
	before := g.mainPID(t)
	names := []string{"everything", "fake", "isolated"}
	runs := map[string]map[string]string{}
	for _, name := range names {
		runs[name] = g.show(t, unitOf(name), "MainPID", "InvocationID")
	}
	cursor := c.Run(t, "journalctl", "--show-cursor", "-n", "0", "--quiet")
	// Another file at the path, as dpkg installs one.
	c.Run(t, "sh", "-c", "cp -p /usr/bin/mcpgated /usr/bin/mcpgated.e2e && mv /usr/bin/mcpgated.e2e /usr/bin/mcpgated")
	begin := time.Now()
	c.Run(t, "systemctl", "reload", "mcpgate.service")
	testutil.Eventually(t, 60*time.Second, "mcpgated running the new binary", func() bool {
		res, err := c.Exec(t.Context(), nil, "readlink", fmt.Sprintf("/proc/%d/exe", before))
		return err == nil && strings.TrimSpace(res.Stdout) == "/usr/bin/mcpgated"
	})
	g.awaitReady(t)
	took := time.Since(begin)
	if after := g.mainPID(t); after != before {
		t.Errorf("MainPID %d before the reload, %d after; want the same: a re-exec in place", before, after)
	}
	for _, name := range names {
		now := g.show(t, unitOf(name), "MainPID", "InvocationID", "ActiveState")
		if now["MainPID"] != runs[name]["MainPID"] || now["InvocationID"] != runs[name]["InvocationID"] || now["ActiveState"] != "active" {
			t.Errorf("%s was %v before the re-exec and is %v after; want the same run, active", unitOf(name), runs[name], now)
		}
	}
	adopted, handshakes := g.takenOver(t, cursor, names)
	for b, msg := range handshakes {
		if b != "pooled" {
			t.Errorf("backend %s made a new handshake during the re-exec: %s", b, msg)
		}
	}
	for _, name := range names {
		if !adopted[name] {
			t.Errorf("the journal has no entry of backend %s taken over", name)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	g.closeClient()
	cs, err := g.connect(ctx)
	if err != nil {
		t.Fatalf("MCP client after the re-exec: %v", err)
	}
	g.client = cs
	if got := callText(t, cs, "everything__get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(got, "5") {
		t.Errorf("everything__get-sum 2+3 answered %q after the re-exec", got)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("systemctl reload with a new binary re-executed mcpgated in %v (MainPID %d kept); units %v the same runs, taken over without a handshake",
		took.Round(time.Millisecond), before, names)
}

// checkRestart: mcpgatectl restart and D-Bus Restart restart the unit.
func (u *unitsCheck) checkRestart(t *testing.T) string {
	g, c := u.g, u.g.c
	inv := func(name string) string { return g.show(t, unitOf(name), "InvocationID")["InvocationID"] }
	before, invBefore := g.backendPID(t, "everything"), inv("everything")
	c.Run(t, "mcpgatectl", "restart", "everything")
	after := g.backendPID(t, "everything")
	if after == before || inv("everything") == invBefore || g.alive(t, before) {
		t.Errorf("mcpgatectl restart everything: PID %d → %d, invocation %s → %s", before, after, invBefore, inv("everything"))
	}
	fakeBefore := g.backendPID(t, "fake")
	c.Run(t, "busctl", "call", busName, backendPath("fake"), backendIf, "Restart")
	fakeAfter := g.backendPID(t, "fake")
	if fakeAfter == fakeBefore || g.show(t, unitOf("fake"), "MainPID")["MainPID"] != strconv.Itoa(fakeAfter) {
		t.Errorf("D-Bus Restart of fake: PID %d → %d, unit MainPID %s", fakeBefore, fakeAfter, g.show(t, unitOf("fake"), "MainPID")["MainPID"])
	}
	if got := callText(t, g.client, "everything__echo", map[string]any{"message": "after restart"}); !strings.Contains(got, "after restart") {
		t.Errorf("everything__echo after the restart answered %q", got)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("everything %d → %d (mcpgatectl), fake %d → %d (D-Bus)", before, after, fakeBefore, fakeAfter)
}

// checkCrash: a server killed in its unit is seen on the unit, journaled
// with its unit and signal, and restarted by mcpgate's policy.
func (u *unitsCheck) checkCrash(t *testing.T) string {
	g, c := u.g, u.g.c
	old := g.backendPID(t, "fake")
	restarts := g.backendProp(t, "fake", "NRestarts")
	killed := time.Now()
	c.Run(t, "kill", "-9", strconv.Itoa(old))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	exit, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return e["MCPGATE_BACKEND_PID"] == strconv.Itoa(old) },
		"--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageExit.String(), "MCPGATE_BACKEND=fake")
	if err != nil {
		t.Fatal(err)
	}
	if exit["MCPGATE_UNIT"] != unitOf("fake") || exit["MCPGATE_SIGNAL"] != "SIGKILL" || exit["MCPGATE_EXIT_CODE"] != "killed" {
		t.Errorf("exit entry %q: MCPGATE_UNIT=%q MCPGATE_SIGNAL=%q MCPGATE_EXIT_CODE=%q", exit["MESSAGE"], exit["MCPGATE_UNIT"], exit["MCPGATE_SIGNAL"], exit["MCPGATE_EXIT_CODE"])
	}
	ready, err := c.AwaitJournal(ctx, func(e JournalEntry) bool {
		return e["MCPGATE_BACKEND_PID"] != strconv.Itoa(old) && realtime(e).After(killed)
	}, "--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageBackendReady.String(), "MCPGATE_BACKEND=fake")
	if err != nil {
		t.Fatal(err)
	}
	if got := g.backendProp(t, "fake", "NRestarts"); got != restarts+1 {
		t.Errorf("fake's NRestarts is %d, was %d", got, restarts)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("kill -9 %d: %q; ready again as %s after %v", old, exit["MESSAGE"], ready["MCPGATE_BACKEND_PID"], realtime(ready).Sub(killed).Round(time.Millisecond))
}

// checkPolkit: user mcpgate may manage mcpgate-backend@*.service and
// nothing else; without the package's rule, --check-config says why the
// units cannot run.
func (u *unitsCheck) checkPolkit(t *testing.T) string {
	c := u.g.c
	asMcpgate := func(args ...string) (Result, error) {
		return c.Exec(t.Context(), nil, append([]string{"runuser", "-u", "mcpgate", "--"}, args...)...)
	}
	if _, err := asMcpgate("systemctl", "--no-ask-password", "reset-failed", unitOf("fake")); err != nil {
		t.Errorf("user mcpgate may not reset-failed %s: %v", unitOf("fake"), err)
	}
	c.WriteFile(t, "/etc/systemd/system/e2e-dummy.service", []byte(dummyUnit), 0o644)
	c.Run(t, "systemctl", "daemon-reload")
	var refused []string
	for _, args := range [][]string{
		{"systemctl", "--no-ask-password", "start", "e2e-dummy.service"},
		{"systemctl", "--no-ask-password", "stop", "mcpgate.service"},
		{"systemd-run", "--no-ask-password", "--unit=mcpgate-backend@evil.service", "/bin/true"},
	} {
		res, err := asMcpgate(args...)
		if err == nil {
			t.Errorf("user mcpgate may %s", strings.Join(args, " "))
		}
		refused = append(refused, firstLine(strings.TrimSpace(res.Stderr)))
	}
	if state := c.Run(t, "systemctl", "show", "--property=ActiveState", "--value", "mcpgate.service"); state != "active" {
		t.Errorf("mcpgate.service is %s after user mcpgate tried to stop it", state)
	}
	// Without the rule, the check says what is missing.
	var res Result
	var err error
	withoutFile(t, c, "/usr/share/polkit-1/rules.d/50-mcpgate.rules", []string{"systemctl", "restart", "polkit.service"}, func() {
		res, err = asMcpgate("mcpgated", "--check-config")
	})
	if err == nil || !strings.Contains(res.Stderr, "polkit does not let this user manage mcpgate-backend@*.service") {
		t.Errorf("--check-config without the polkit rule: %v, %q", err, res.Stderr)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("reset-failed of a backend unit allowed; refused: %s; --check-config without the rule: %s", strings.Join(refused, " | "), firstLine(res.Stderr))
}

// checkTemplate: without the template, --check-config refuses the unit
// runner and says that the template is missing; with it back, it passes.
func (u *unitsCheck) checkTemplate(t *testing.T) string {
	c := u.g.c
	path := c.Run(t, "systemctl", "show", "--property=FragmentPath", "--value", unitOf("fake"))
	if !strings.HasSuffix(path, "/mcpgate-backend@.service") {
		t.Fatalf("%s comes from %q, not from the template", unitOf("fake"), path)
	}
	var res Result
	var err error
	withoutFile(t, c, path, []string{"systemctl", "daemon-reload"}, func() {
		res, err = c.Exec(t.Context(), nil, "runuser", "-u", "mcpgate", "--", "mcpgated", "--check-config")
	})
	if err == nil || !strings.Contains(res.Stderr, "the template mcpgate-backend@.service is not installed") {
		t.Errorf("--check-config without the template: %v, %q", err, res.Stderr)
	}
	if _, err := c.Exec(t.Context(), nil, "runuser", "-u", "mcpgate", "--", "mcpgated", "--check-config"); err != nil {
		t.Errorf("--check-config with the template back: %v", err)
	}
	if t.Failed() {
		return ""
	}
	return "--check-config without " + path + ": " + firstLine(strings.TrimSpace(res.Stderr))
}

// withoutFile runs fn while path is moved aside, running reload after
// each move. path is back when it returns, also when the test fails on
// the way.
func withoutFile(t *testing.T, c *Container, path string, reload []string, fn func()) {
	t.Helper()
	saved := "/root/" + filepath.Base(path) + ".saved"
	c.Run(t, "mv", path, saved)
	defer func() {
		if _, err := c.Exec(context.Background(), nil, "mv", saved, path); err != nil {
			t.Errorf("put %s back: %v", path, err)
			return
		}
		if _, err := c.Exec(context.Background(), nil, reload...); err != nil {
			t.Errorf("%s after putting %s back: %v", strings.Join(reload, " "), path, err)
		}
	}()
	c.Run(t, reload...)
	fn()
}

// checkSocket: a process outside the backend units that connects to the
// backend socket, even one that names a backend, gets nothing and is
// journaled.
func (u *unitsCheck) checkSocket(t *testing.T) string {
	c := u.g.c
	mode := c.Run(t, "stat", "-c", "%a %U %G", "/run/mcpgate-backends/exec.sock")
	if mode != "660 mcpgate mcpgate-backend" {
		t.Errorf("exec.sock: mode, owner, group %q; want 660 mcpgate mcpgate-backend", mode)
	}
	res, err := c.Exec(t.Context(), nil, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
		"/usr/libexec/mcpgate/backend-exec", "fake")
	if err == nil || strings.Contains(res.Stdout+res.Stderr, "FAKE_SECRET") || !strings.Contains(res.Stderr, "permission denied") {
		t.Fatalf("backend-exec run by nobody: %v, stdout %q, stderr %q; want permission denied at connect", err, res.Stdout, res.Stderr)
	}
	// A process of the backends' group that is no backend unit connects,
	// and is refused; a flood of them is journaled within the limit (5 per
	// uid and minute). Each refusal is journaled before its connection
	// closes, so once the loop is done every entry has been sent.
	since := time.Now()
	const flood = 30
	loop := fmt.Sprintf("for i in $(seq %d); do setpriv --reuid=nobody --regid=mcpgate-backend --clear-groups -- /usr/libexec/mcpgate/backend-exec fake 2>/dev/null; done; true", flood)
	c.Run(t, "sh", "-c", loop)
	refusal := func(e JournalEntry) bool {
		return realtime(e).After(since) && strings.Contains(e["MESSAGE"], "backend socket: refused a connection")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return refusal(e) && e["MCPGATE_NOTE"] != "" }, "--unit=mcpgate.service"); err != nil {
		t.Fatalf("the last refusal journaled within the limit: %v", err)
	}
	entries, err := c.Journal(t.Context(), "--unit=mcpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	n, first := 0, ""
	for _, e := range entries {
		if refusal(e) {
			if n++; first == "" {
				first = e["MESSAGE"]
			}
		}
	}
	if n != 5 {
		t.Errorf("%d refusals journaled for %d connections of one uid, want 5", n, flood)
	}
	return fmt.Sprintf("exec.sock %s; nobody: %s; %d connections from group mcpgate-backend: %d journaled, e.g. %s",
		mode, firstLine(strings.TrimSpace(res.Stderr)), flood, n, first)
}

// checkStopAll: stopping the gateway stops every backend unit.
func (u *unitsCheck) checkStopAll(t *testing.T) string {
	g, c := u.g, u.g.c
	g.closeClient()
	res, err := c.Exec(t.Context(), nil, "systemctl", "stop", "mcpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"everything", "fake", "isolated"} {
		if state := g.show(t, unitOf(name), "ActiveState")["ActiveState"]; state != "inactive" {
			t.Errorf("%s is %s after systemctl stop mcpgate", unitOf(name), state)
		}
	}
	left := c.Run(t, "sh", "-c", "systemctl list-units --no-legend --plain 'mcpgate-backend@*' | grep -c running || true")
	if left != "0" {
		t.Errorf("%s backend units still run", left)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("systemctl stop mcpgate in %v: every backend unit inactive", res.Elapsed.Round(time.Millisecond))
}
