package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// envUpgradeFrom names the package TestUpgradeFromPrevious installs first;
// `make e2e` sets it to what packaging/e2e/upgrade-from.sh built. Unset, the
// test runs that script itself.
const envUpgradeFrom = "MCPGATE_E2E_UPGRADE_FROM"

// upgradeConfig is TestUpgradeFromPrevious' drop-in: two backends under the
// packaged runner = "unit", each a unit that a restart of the gateway
// stops and the new mcpgated starts.
var upgradeConfig = fmt.Sprintf(`# Written by internal/e2e (TestUpgradeFromPrevious).
[backends.fake]
command = %[1]q
args = ["--name", "fake"]

[backends.other]
command = %[1]q
args = ["--name", "other"]
`, fakeBin)

// TestUpgradeFromPrevious is issue 46's end-to-end test of the move of the
// units from /lib/systemd/system to /usr/lib/systemd/system and of
// StopPropagatedFrom=: the previous package (packaging/e2e/upgrade-from.sh)
// is installed and runs two backend units; the upgrade to this one prints
// no warning but dpkg's own about the aliased directories the previous
// package alone listed (see checkUpgrade), leaves the units only where this
// package puts them and restarts the gateway (try-restart) without a
// backend failing on the way; so does `systemctl restart mcpgate`; and the
// purge prints no warning and leaves nothing.
func TestUpgradeFromPrevious(t *testing.T) {
	Require(t)
	r, g, _ := bootInstalled(t)
	u := &upgradeCheck{g: g}
	g.c.CopyFile(t, upgradeFromDeb(t), "/root/mcpgate-previous.deb", 0o644)

	r.step("p1-previous", u.checkPrevious)
	r.step("p2-upgrade", u.checkUpgrade)
	r.step("p3-restart", u.checkRestart)
	r.step("p4-purge", u.checkPurge)
}

type upgradeCheck struct {
	g *installedGateway
}

// upgradeFromDeb returns the package to upgrade from: $MCPGATE_E2E_UPGRADE_FROM,
// or what packaging/e2e/upgrade-from.sh builds (once per machine).
func upgradeFromDeb(t *testing.T) string {
	if p := os.Getenv(envUpgradeFrom); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$%s: %v", envUpgradeFrom, err)
		}
		return p
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(testutil.ModuleRoot(), "packaging/e2e/upgrade-from.sh"))
	cmd.Dir = testutil.ModuleRoot()
	cmd.Stderr = &lineLogger{t: t}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("packaging/e2e/upgrade-from.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// checkPrevious: the previous package installed and running two backend
// units. (Under its template, PartOf=, a restart made each unit fail
// first, "cannot reach mcpgated" or refused by the stopping mcpgated,
// "exited with status 1", what failures finds; on bookworm the old
// mcpgated then waited for a unit until systemd killed it 30s later. That
// costs too much to run here as a control.)
func (u *upgradeCheck) checkPrevious(t *testing.T) string {
	g, c := u.g, u.g.c
	if res, err := c.Exec(t.Context(), nil, "dpkg", "-i", "/root/mcpgate-previous.deb"); err != nil {
		t.Fatalf("%v\n%s", err, res.Stdout)
	}
	old := c.Run(t, "dpkg-query", "-W", "-f=${Version}", "mcpgate")
	c.WriteFile(t, "/etc/mcpgate/conf.d/upgrade.toml", []byte(upgradeConfig), 0o644)
	g.token = c.Run(t, "mcpgatectl", "token", "create", "e2e")
	u.start(t)
	u.checkUnitsRun(t)
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("mcpgate %s runs fake and other as units", old)
}

// checkUpgrade: dpkg -i of this package over the previous one prints no
// warning, the package's units are in /usr/lib/systemd/system alone, and
// the running gateway restarted into the new version without a backend
// failing on the way.
func (u *upgradeCheck) checkUpgrade(t *testing.T) string {
	g, c := u.g, u.g.c
	before := g.mainPID(t)
	// dpkg removes the directories the previous package listed and this
	// one does not, unless another package lists them. /lib/systemd/system
	// is /usr/lib/systemd/system under merged /usr, which is not empty:
	// where the previous package was their only owner (trixie, whose
	// packages all moved to /usr), dpkg 1.22 warns that it cannot remove
	// them. That is dpkg's, for every package leaving an aliased
	// directory; no package can avoid it. Nothing else may be said.
	tolerated := map[string]bool{}
	for _, dir := range []string{"/lib/systemd/system", "/lib/systemd"} {
		if owners := c.Run(t, "sh", "-c", "dpkg-query --search "+dir+" | cut -d: -f1"); owners == "mcpgate" {
			tolerated["dpkg: warning: unable to delete old directory '"+dir+"': Directory not empty"] = true
		}
	}
	upgradeAt := time.Now()
	res, err := c.Exec(t.Context(), nil, "dpkg", "-i", g.deb)
	if err != nil {
		t.Fatalf("dpkg -i over the previous package: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	var said []string
	for line := range strings.SplitSeq(res.Stdout+res.Stderr, "\n") {
		lower := strings.ToLower(line)
		if !strings.Contains(lower, "warning") && !strings.Contains(lower, "error") {
			continue
		}
		if tolerated[strings.TrimSpace(line)] {
			said = append(said, strings.TrimSpace(line))
			continue
		}
		t.Errorf("dpkg -i over the previous package printed: %s", line)
	}
	var units []string
	for f := range strings.SplitSeq(c.Run(t, "dpkg-query", "--listfiles", "mcpgate"), "\n") {
		if strings.Contains(f, "systemd/system") {
			units = append(units, f)
		}
	}
	want := []string{"/usr/lib/systemd/system", "/usr/lib/systemd/system/mcpgate-backend@.service",
		"/usr/lib/systemd/system/mcpgate.service", "/usr/lib/systemd/system/mcpgate.socket"}
	slices.Sort(units)
	if !slices.Equal(units, want) {
		t.Errorf("after the upgrade the package lists %q, want %q", units, want)
	}
	for _, unit := range []string{"mcpgate.service", "mcpgate.socket", "mcpgate-backend@.service"} {
		c.Run(t, "test", "-f", "/usr/lib/systemd/system/"+unit) // not lost on the way (same file under /lib)
	}
	for _, name := range []string{"fake", "other"} {
		g.awaitBackendReady(t, name, upgradeAt)
	}
	after := g.mainPID(t)
	if after == before {
		t.Errorf("mcpgated's MainPID is still %d after the upgrade, want it restarted (try-restart)", after)
	}
	u.checkUnitsRun(t)
	if failures := u.failures(t, upgradeAt); len(failures) > 0 {
		t.Errorf("during the upgrade's restart a backend failed:\n%s", strings.Join(failures, "\n"))
	}
	if t.Failed() {
		return ""
	}
	warned := "no warning"
	if len(said) > 0 {
		warned = "only dpkg's about the aliased directories the previous package alone listed: " + strings.Join(said, "; ")
	}
	return fmt.Sprintf("dpkg -i in %v, %s; units only in /usr/lib/systemd/system; mcpgated %d → %d, fake and other ready again, no backend failed",
		res.Elapsed.Round(time.Millisecond), warned, before, after)
}

// checkRestart: systemctl restart mcpgate stops the backend units with the
// gateway and the new mcpgated starts them: none fails on the way.
func (u *upgradeCheck) checkRestart(t *testing.T) string {
	g, c := u.g, u.g.c
	pids := map[string]int{"fake": g.backendPID(t, "fake"), "other": g.backendPID(t, "other")}
	restartAt := time.Now()
	res, err := c.Exec(t.Context(), nil, "systemctl", "restart", "mcpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if now := g.awaitBackendReady(t, name, restartAt); now == pid {
			t.Errorf("backend %s kept its PID %d across the restart", name, pid)
		}
	}
	u.checkUnitsRun(t)
	if failures := u.failures(t, restartAt); len(failures) > 0 {
		t.Errorf("during systemctl restart mcpgate a backend failed:\n%s", strings.Join(failures, "\n"))
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("systemctl restart in %v: fake %d, other %d replaced, no backend failed", res.Elapsed.Round(time.Millisecond), pids["fake"], pids["other"])
}

// checkPurge: dpkg --purge prints nothing alarming and leaves none of the
// package's files; on trixie the previous package's /lib/systemd/system
// made dpkg warn here.
func (u *upgradeCheck) checkPurge(t *testing.T) string {
	g, c := u.g, u.g.c
	g.closeClient()
	files := strings.Split(c.Run(t, "dpkg-query", "--listfiles", "mcpgate"), "\n")
	res, err := c.Exec(t.Context(), nil, "dpkg", "--purge", "mcpgate")
	if err != nil {
		t.Fatalf("%v\n%s%s", err, res.Stdout, res.Stderr)
	}
	noDpkgWarning(t, "dpkg --purge", res)
	if left := c.RunInput(t, strings.Join(files, "\n")+"\n", "sh", "-c", leftoverFiles); left != "" {
		t.Errorf("left after the purge:\n%s", left)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("dpkg --purge in %v, no warning; none of its %d paths left", res.Elapsed.Round(time.Millisecond), len(files))
}

// start starts the gateway through its first client and waits for READY=1.
func (u *upgradeCheck) start(t *testing.T) {
	t.Helper()
	g := u.g
	g.closeClient()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs, err := g.connect(ctx)
	if err != nil {
		t.Fatalf("MCP client: %v", err)
	}
	g.client = cs
	g.awaitReady(t)
}

// checkUnitsRun checks that each backend runs as its unit's main process.
func (u *upgradeCheck) checkUnitsRun(t *testing.T) {
	t.Helper()
	g := u.g
	for _, name := range []string{"fake", "other"} {
		props := g.show(t, unitOf(name), "ActiveState", "MainPID")
		if props["ActiveState"] != "active" || props["MainPID"] != strconv.Itoa(g.backendPID(t, name)) {
			t.Errorf("%s is %v, want active with the backend's MainPID", unitOf(name), props)
		}
	}
}

// failures returns what the journal of mcpgate.service and the backend
// units says since since of a backend failing: backend-exec not reaching
// mcpgated, its report of a failed run ("exited with status 1"), systemd's
// "Failed with result", and any other entry at warning level or worse
// (such as the previous mcpgated's "did not exit in time").
func (u *upgradeCheck) failures(t *testing.T, since time.Time) []string {
	t.Helper()
	var out []string
	for _, e := range u.g.journal(t, "--unit=mcpgate.service", "--unit=mcpgate-backend@*.service") {
		if !realtime(e).After(since) {
			continue
		}
		msg := e["MESSAGE"]
		prio, err := strconv.Atoi(e["PRIORITY"])
		failed := e["MESSAGE_ID"] == sdUnitResult && e["UNIT_RESULT"] != "success" || err == nil && prio <= 4
		for _, s := range []string{"cannot reach mcpgated", "exited with status", "status=1/FAILURE", "failed with result"} {
			failed = failed || strings.Contains(msg, s) && !strings.Contains(msg, "exited with status 0")
		}
		if failed {
			unit := e["UNIT"] // systemd's own entries about the unit
			if unit == "" {
				unit = e["_SYSTEMD_UNIT"]
			}
			out = append(out, unit+": "+msg)
		}
	}
	return out
}
