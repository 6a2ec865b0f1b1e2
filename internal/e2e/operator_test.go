package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// operatorConfig is TestOperator's drop-in, under the packaged runner =
// "unit": a healthy backend, one whose server exits 3 at start, one that
// runs as mcpgated's child (runner = "process"), two that need a
// credential (one of which systemd finds no file for), and one that writes
// to a directory of the operator's.
var operatorConfig = fmt.Sprintf(`# Written by internal/e2e (TestOperator).
[backends.ok]
command = %[1]q
args = ["--name", "ok"]

[backends.broken]
command = %[1]q
args = ["--name", "broken", "--exit-at-start", "3", "--stderr-at-start", "broken: no such database"]
max_restarts = 0

[backends.proc]
command = %[1]q
args = ["--name", "proc"]
runner = "process"

[backends.withcred]
command = %[1]q
args = ["--name", "withcred"]
env = { TOKEN = "${credential:present}" }

[backends.nocred]
command = %[1]q
args = ["--name", "nocred"]
env = { TOKEN = "${credential:absent}" }
max_restarts = 0

[backends.notes]
command = %[1]q
args = ["--name", "notes", "--record", "/srv/notes/record.jsonl"]

[backends.notesrw]
command = %[1]q
args = ["--name", "notesrw", "--record", "/srv/notes/notesrw.jsonl"]
max_restarts = 0
`, fakeBin)

// operatorCredentials is the drop-in of mcpgate.service that mcpgated(8)
// suggests: credentials by name, found in systemd's credential store
// /etc/credstore, which purge does not touch. systemd 252 skips a name it
// finds no file for, so the gateway starts and only the backend that needs
// it fails.
const operatorCredentials = "# Written by internal/e2e (TestOperator).\n[Service]\nLoadCredential=present\nLoadCredential=absent\n"

// notesDropIn lets backend notes write to /srv/notes, a directory of group
// notes, as mcpgated(8) says: ReadWritePaths= alone fails with EACCES, the
// dynamic user owning nothing there.
const notesDropIn = "# Written by internal/e2e (TestOperator).\n[Service]\nSupplementaryGroups=notes\nReadWritePaths=/srv/notes\n"

// notesRWDropIn is what mcpgated(8) warns about: ReadWritePaths= alone.
const notesRWDropIn = "# Written by internal/e2e (TestOperator).\n[Service]\nReadWritePaths=/srv/notes\n"

// TestOperator is issue 22's end-to-end test of what an operator meets
// from a fresh install to the purge: mcpgatectl status before the daemon
// ever ran, a failing backend's reason in its unit's status, reserved
// variables on both runners, a missing credential failing only its
// backend, a backend writing to the operator's directory, a removed
// backend's failed unit reset, and a purge that leaves nothing.
func TestOperator(t *testing.T) {
	Require(t)
	r, g, _ := bootInstalled(t)
	o := &operatorCheck{g: g}

	r.step("o1-status-socket", o.checkStatusSocket)
	r.step("o2-start", o.checkStart)
	r.step("o3-reserved-env", o.checkReservedEnv)
	r.step("o4-unit-status", o.checkUnitStatus)
	r.step("o5-credentials", o.checkCredentials)
	r.step("o6-rw-paths", o.checkReadWritePaths)
	r.step("o7-reset-failed", o.checkResetFailed)
	r.step("o8-purge", o.checkPurge)
	r.step("o9-reinstall", o.checkReinstall)
}

type operatorCheck struct {
	g *installedGateway
}

// checkStatusSocket: right after installation only the socket listens;
// mcpgatectl status says so and what starts the daemon, and exits 7.
func (o *operatorCheck) checkStatusSocket(t *testing.T) string {
	c := o.g.c
	if res, err := c.Exec(t.Context(), nil, "dpkg", "-i", o.g.deb); err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	if state := o.g.activeState(t); state != "inactive" {
		t.Fatalf("mcpgate.service is %s right after installation, want inactive", state)
	}
	res, _ := c.Exec(t.Context(), nil, "mcpgatectl", "status")
	msg := strings.TrimSpace(res.Stderr)
	if res.ExitCode != 7 {
		t.Errorf("mcpgatectl status exited %d, want 7 (not running)", res.ExitCode)
	}
	for _, want := range []string{"mcpgate.socket is listening on 127.0.0.1:7431 and /run/mcpgate/mcpgate.sock", "the first connection to it", `"systemctl start mcpgate"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("mcpgatectl status says %q, which lacks %q", msg, want)
		}
	}
	// An unprivileged user may ask systemd about the units as well.
	if user, _ := c.Exec(t.Context(), nil, "runuser", "-u", "nobody", "--", "mcpgatectl", "status"); user.ExitCode != 7 || !strings.Contains(user.Stderr, "mcpgate.socket is listening") {
		t.Errorf("mcpgatectl status as nobody exited %d: %s", user.ExitCode, user.Stderr)
	}
	if state := o.g.activeState(t); state != "inactive" {
		t.Errorf("mcpgatectl status started mcpgate.service (%s)", state)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("exit %d: %s", res.ExitCode, msg)
}

// checkStart writes the configuration, the credential drop-in and the
// notes directory, and starts the gateway with the first client.
func (o *operatorCheck) checkStart(t *testing.T) string {
	g, c := o.g, o.g.c
	c.WriteFile(t, "/etc/mcpgate/conf.d/operator.toml", []byte(operatorConfig), 0o644)
	c.WriteFile(t, "/etc/credstore/present", []byte("s3cret\n"), 0o600)
	c.WriteFile(t, "/etc/systemd/system/mcpgate.service.d/credentials.conf", []byte(operatorCredentials), 0o644)
	c.WriteFile(t, "/etc/systemd/system/"+unitOf("notes")+".d/data.conf", []byte(notesDropIn), 0o644)
	c.WriteFile(t, "/etc/systemd/system/"+unitOf("notesrw")+".d/data.conf", []byte(notesRWDropIn), 0o644)
	c.Run(t, "sh", "-c", "groupadd --system notes && install -d -m 2770 -g notes /srv/notes")
	c.Run(t, "systemctl", "daemon-reload")
	g.token = c.Run(t, "mcpgatectl", "token", "create", "e2e")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs, err := g.connect(ctx)
	if err != nil {
		t.Fatalf("first MCP client: %v", err)
	}
	g.client = cs
	g.awaitReady(t) // the client is served before every backend is
	if state := g.activeState(t); state != "active" {
		t.Fatalf("mcpgate.service is %s, want active", state)
	}
	return "gateway active with 7 backends configured"
}

// checkReservedEnv: no variable mcpgate.toml(5) reserves reaches a
// server, under either runner, although systemd sets JOURNAL_STREAM for
// both mcpgated and each backend unit.
func (o *operatorCheck) checkReservedEnv(t *testing.T) string {
	g, c := o.g, o.g.c
	var seen []string
	for _, name := range []string{"ok", "proc"} {
		pid := g.backendPID(t, name)
		env := strings.Split(c.Run(t, "sh", "-c", fmt.Sprintf("tr '\\0' '\\n' </proc/%d/environ", pid)), "\n")
		for _, kv := range env {
			v, _, _ := strings.Cut(kv, "=")
			if slices.Contains(config.ReservedEnv(), v) {
				t.Errorf("backend %s (PID %d) has the reserved %s", name, pid, kv)
			}
		}
		seen = append(seen, fmt.Sprintf("%s (PID %d): %d variables", name, pid, len(env)))
	}
	// The units do get JOURNAL_STREAM: the check means something.
	if env := c.Run(t, "sh", "-c", fmt.Sprintf("tr '\\0' '\\n' </proc/%d/environ", g.mainPID(t))); !strings.Contains(env, "JOURNAL_STREAM=") {
		t.Errorf("mcpgated has no JOURNAL_STREAM; the check shows nothing")
	}
	if t.Failed() {
		return ""
	}
	return strings.Join(seen, "; ") + ", none reserved (" + strings.Join(config.ReservedEnv(), " ") + ")"
}

// checkUnitStatus: systemctl status of a backend unit that failed says how
// the server ended and where its standard error is.
func (o *operatorCheck) checkUnitStatus(t *testing.T) string {
	c := o.g.c
	unit := unitOf("broken")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := c.AwaitJournal(ctx, func(e JournalEntry) bool { return strings.Contains(e["MESSAGE"], "backend-exec: the MCP server") },
		"_SYSTEMD_UNIT="+unit); err != nil {
		t.Fatal(err)
	}
	res, _ := c.Exec(t.Context(), nil, "systemctl", "status", "--no-pager", "--lines=20", unit)
	for _, want := range []string{"status=3", "backend broken exited with status 3", `"mcpgatectl logs broken"`} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("systemctl status %s lacks %q:\n%s", unit, want, res.Stdout)
		}
	}
	// What the pointer points at holds the server's stderr.
	if logs := c.Run(t, "mcpgatectl", "logs", "broken"); !strings.Contains(logs, "broken: no such database") {
		t.Errorf("mcpgatectl logs broken lacks the server's stderr:\n%s", logs)
	}
	if t.Failed() {
		return ""
	}
	return "systemctl status: " + firstLine(lastMatching(res.Stdout, "backend-exec:"))
}

// checkCredentials: a LoadCredential= whose file systemd does not find
// fails only the backend that needs it.
func (o *operatorCheck) checkCredentials(t *testing.T) string {
	g, c := o.g, o.g.c
	env := c.Run(t, "sh", "-c", fmt.Sprintf("tr '\\0' '\\n' </proc/%d/environ", g.backendPID(t, "withcred")))
	if !strings.Contains(env, "TOKEN=s3cret") {
		t.Errorf("withcred lacks its credential in its environment")
	}
	res, _ := c.Exec(t.Context(), nil, "mcpgatectl", "status", "nocred")
	if res.ExitCode != 3 || !strings.Contains(res.Stdout, "failed") || !strings.Contains(res.Stdout, "${credential:absent}") {
		t.Errorf("mcpgatectl status nocred (exit %d) does not show it failed for its credential:\n%s", res.ExitCode, res.Stdout)
	}
	for _, name := range []string{"ok", "withcred", "notes"} {
		if out, err := c.Exec(t.Context(), nil, "mcpgatectl", "status", name); err != nil {
			t.Errorf("%s is not healthy beside nocred: %v\n%s", name, err, out.Stdout)
		}
	}
	if t.Failed() {
		return ""
	}
	return "withcred has its credential; nocred failed: " + lastMatching(res.Stdout, "absent")
}

// checkReadWritePaths: with the drop-in mcpgated(8) shows, the backend's
// dynamic user writes to the operator's directory; with ReadWritePaths=
// alone, as the man page warns, it cannot.
func (o *operatorCheck) checkReadWritePaths(t *testing.T) string {
	g, c := o.g, o.g.c
	res, _ := c.Exec(t.Context(), nil, "mcpgatectl", "status", "notesrw")
	if res.ExitCode != 3 || !strings.Contains(res.Stdout, "permission denied") {
		t.Errorf("notesrw, with ReadWritePaths= alone, is not failed for want of permission (exit %d):\n%s", res.ExitCode, res.Stdout)
	}
	pid := g.backendPID(t, "notes")
	uid := strings.Fields(parseColonFields(c.Run(t, "cat", fmt.Sprintf("/proc/%d/status", pid)))["Uid"])[0]
	owner := c.Run(t, "stat", "--format=%u:%G %a", "/srv/notes/record.jsonl")
	if !strings.HasPrefix(owner, uid+":notes ") {
		t.Errorf("/srv/notes/record.jsonl is %s, want owned by notes' dynamic uid %s and group notes", owner, uid)
	}
	if rec := c.Run(t, "cat", "/srv/notes/record.jsonl"); !strings.Contains(rec, `"initialize"`) {
		t.Errorf("notes recorded nothing in /srv/notes: %q", rec)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("notes (uid %d) wrote /srv/notes/record.jsonl (%s); notesrw with ReadWritePaths= alone: %s", atoi(uid), owner, lastMatching(res.Stdout, "permission denied"))
}

// checkResetFailed: a backend removed by a reload does not leave its
// failed unit in systemctl --failed.
func (o *operatorCheck) checkResetFailed(t *testing.T) string {
	g, c := o.g, o.g.c
	unit := unitOf("broken")
	if state := g.show(t, unit, "ActiveState")["ActiveState"]; state != "failed" {
		t.Fatalf("%s is %s before the reload, want failed", unit, state)
	}
	var kept []string
	for block := range strings.SplitSeq(operatorConfig, "\n\n") {
		if !strings.Contains(block, "[backends.broken]") {
			kept = append(kept, block)
		}
	}
	c.WriteFile(t, "/etc/mcpgate/conf.d/operator.toml", []byte(strings.Join(kept, "\n\n")), 0o644)
	c.Run(t, "systemctl", "reload", "mcpgate")
	if state := g.show(t, unit, "ActiveState")["ActiveState"]; state == "failed" {
		t.Errorf("%s is still failed after its backend was removed", unit)
	}
	if failed := c.Run(t, "systemctl", "list-units", "--failed", "--plain", "--no-legend", "mcpgate*"); strings.Contains(failed, unit) {
		t.Errorf("systemctl --failed lists:\n%s", failed)
	}
	entries := g.journal(t, "--unit=mcpgate.service", "--grep=reset the failed state")
	if len(entries) == 0 || !strings.Contains(entries[len(entries)-1]["MESSAGE"], unit) {
		t.Errorf("mcpgated journaled no reset of %s", unit)
	}
	if t.Failed() {
		return ""
	}
	return entries[len(entries)-1]["MESSAGE"]
}

// checkPurge: remove keeps the backend units' state and cache, purge takes
// them; no backend unit stays failed.
func (o *operatorCheck) checkPurge(t *testing.T) string {
	g, c := o.g, o.g.c
	g.closeClient()
	// notesrw's unit failed for good; the removal stops the rest, and
	// nothing of mcpgate may stay in systemctl --failed.
	dirs := []string{"/var/lib/mcpgate-backend", "/var/lib/private/mcpgate-backend", "/var/cache/mcpgate-backend", "/var/cache/private/mcpgate-backend"}
	if res, err := c.Exec(t.Context(), nil, "dpkg", "--remove", "mcpgate"); err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	for _, d := range dirs {
		if res, err := c.Exec(t.Context(), nil, "test", "-d", d+"/ok"); err != nil {
			t.Errorf("dpkg --remove took %s/ok (state is kept until purge): %v", d, res.Stderr)
		}
	}
	if failed := c.Run(t, "systemctl", "list-units", "--all", "--failed", "--plain", "--no-legend", "mcpgate*"); failed != "" {
		t.Errorf("after dpkg --remove systemctl --failed lists:\n%s", failed)
	}
	if res, err := c.Exec(t.Context(), nil, "dpkg", "--purge", "mcpgate"); err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	var left []string
	for _, d := range dirs {
		if res, _ := c.Exec(t.Context(), nil, "test", "-e", d); res.ExitCode == 0 {
			left = append(left, d)
		}
	}
	if len(left) > 0 {
		t.Errorf("left after the purge: %s", strings.Join(left, " "))
	}
	if t.Failed() {
		return ""
	}
	return "remove kept " + strings.Join(dirs, " ") + "; purge took them; no mcpgate unit failed"
}

// checkReinstall: the credential drop-in the purge leaves (it is the
// operator's) points at /etc/credstore, which the purge leaves too, so
// the reinstalled gateway starts.
func (o *operatorCheck) checkReinstall(t *testing.T) string {
	g, c := o.g, o.g.c
	c.Run(t, "test", "-f", "/etc/systemd/system/mcpgate.service.d/credentials.conf")
	c.Run(t, "test", "-f", "/etc/credstore/present")
	if res, err := c.Exec(t.Context(), nil, "dpkg", "-i", g.deb); err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	if _, err := c.Exec(t.Context(), nil, "systemctl", "start", "mcpgate"); err != nil {
		status, _ := c.Exec(t.Context(), nil, "systemctl", "status", "--no-pager", "mcpgate")
		t.Fatalf("the reinstalled gateway does not start: %v\n%s", err, status.Stdout)
	}
	state := g.show(t, "mcpgate.service", "ActiveState", "Result")
	if state["ActiveState"] != "active" {
		t.Errorf("mcpgate.service is %v after reinstalling", state)
	}
	c.Run(t, "systemctl", "stop", "mcpgate")
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("reinstalled with the credential drop-in in place: mcpgate.service %v", state)
}

// lastMatching returns the last line of s that contains sub.
func lastMatching(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
