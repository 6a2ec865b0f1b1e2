package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// prereqUnit is the unit step 6b's backend requires: a oneshot that stays
// active once started.
const prereqUnit = "e2e-prereq.service"

var prereqUnitFile = `# Written by internal/e2e (TestInstalledPackage).
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
`

// waiterConfig is step 6b's drop-in: a backend that requires prereqUnit.
var waiterConfig = fmt.Sprintf(`# Written by internal/e2e (TestInstalledPackage).
[backends.waiter]
command = %q
args = ["--name", "waiter"]
requires_units = [%q]
prerequisite_timeout = "80s"
`, fakeBin, prereqUnit)

// checkRequiresUnit: a backend added by a reload with requires_units stays
// starting, naming the unit, until the unit is started, and the reload does
// not wait for it; once the unit runs the backend becomes healthy.
func (g *installedGateway) checkRequiresUnit(t *testing.T) string {
	c := g.c
	c.WriteFile(t, "/etc/systemd/system/"+prereqUnit, []byte(prereqUnitFile), 0o644)
	c.Run(t, "systemctl", "daemon-reload")
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e-waiter.toml", []byte(waiterConfig), 0o644)
	// The reload returns with the new backend started, waiting for the
	// unit, which nothing starts but the test, below.
	c.Run(t, "systemctl", "reload", "mcpgate")

	state := func() (string, string) {
		res, err := c.Exec(t.Context(), nil, "busctl", "get-property", busName, backendPath("waiter"), backendIf, "State", "LastError")
		if err != nil {
			return "", ""
		}
		lines := strings.SplitN(res.Stdout, "\n", 2)
		if len(lines) < 2 {
			return "", ""
		}
		return strings.Trim(strings.TrimPrefix(lines[0], "s "), `"`), strings.Trim(strings.TrimSpace(strings.TrimPrefix(lines[1], "s ")), `"`)
	}
	await := func(what string, timeout time.Duration, cond func(st, lastError string) bool) (string, string) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			st, le := state()
			if cond(st, le) {
				return st, le
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter did not become %s within %v: State %q, LastError %q", what, timeout, st, le)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, waiting := await("starting, waiting for "+prereqUnit, 30*time.Second, func(st, le string) bool {
		return st == "starting" && strings.Contains(le, prereqUnit)
	})
	if svc := g.show(t, "mcpgate.service", "ActiveState"); svc["ActiveState"] != "active" {
		t.Errorf("mcpgate.service is %q while the backend the reload added waits for a unit, want active (the reload is done)", svc["ActiveState"])
	}
	started := time.Now()
	c.Run(t, "systemctl", "start", prereqUnit)
	await("healthy", 30*time.Second, func(st, _ string) bool { return st == "healthy" })
	latency := time.Since(started)
	if tools := toolNames(t, g.client); !strings.Contains(strings.Join(tools, " "), "waiter__echo") {
		t.Errorf("tools/list lacks waiter__echo: %v", tools)
	}

	// Leave the gateway as the later steps expect it.
	c.Run(t, "rm", "/etc/mcpgate/conf.d/e2e-waiter.toml")
	c.Run(t, "systemctl", "reload", "mcpgate")
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("the reload returned with waiter waiting (%s); healthy %v after systemctl start %s",
		waiting, latency.Round(time.Millisecond), prereqUnit)
}
