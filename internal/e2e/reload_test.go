package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// heldRecord is where step 6's held backend records what it reads; its
// handshake waits until a second initialize is in it, which the test
// appends.
const heldRecord = "/var/lib/mcpgate/held.record"

// heldConfig is step 6's second drop-in: a backend added by the same
// reload whose handshake hangs until the test lets it go, as an npx that
// takes its time does.
var heldConfig = fmt.Sprintf(`# Written by internal/e2e (TestInstalledPackage).
[backends.held]
command = %q
args = ["--name", "held", "--record", %q, "--initialize-barrier", "2"]
timeout = "10m"
`, fakeBin, heldRecord)

// checkReload: `systemctl reload` with two added backends starts them and
// leaves the others alone. It returns once the configuration is applied,
// while one of the new backends is still in its handshake, which only the
// test ends; each joins the catalog when its handshake ends, as at
// start-up (issue 46, item 4).
func (g *installedGateway) checkReload(t *testing.T) string {
	c := g.c
	mainPID := g.mainPID(t)
	before := map[string]int{"fake": g.backendPID(t, "fake"), "everything": g.backendPID(t, "everything")}
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e-added.toml", []byte(addedConfig), 0o644)
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e-held.toml", []byte(heldConfig), 0o644)
	reloadAt := time.Now()
	res, err := c.Exec(t.Context(), nil, "systemctl", "reload", "mcpgate")
	if err != nil {
		t.Fatal(err)
	}
	if state := g.activeState(t); state != "active" {
		t.Errorf("mcpgate.service is %s once systemctl reload returned, want active", state)
	}
	// held got its initialize and is held in its handshake, which it
	// cannot leave before the gate opens: the reload ended meanwhile.
	c.Run(t, "timeout", "60", "sh", "-c", "until grep -q initialize "+heldRecord+" 2>/dev/null; do sleep 0.1; done")
	heldState := g.backendState(t, "held")
	if heldState != "starting" {
		t.Errorf("held is %q while in its handshake, want starting", heldState)
	}
	if state := g.activeState(t); state != "active" {
		t.Errorf("mcpgate.service is %s while held is in its handshake, want active: the reload is done", state)
	}
	added := g.awaitBackendReady(t, "added", reloadAt)

	var list struct {
		Data [][][2]string `json:"data"` // a(so): one array of (name, path)
	}
	out := c.Run(t, "busctl", "--json=short", "call", busName, busPath, managerIf, "ListBackends")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("ListBackends printed %q: %v", out, err)
	}
	var names []string
	for _, b := range list.Data[0] {
		names = append(names, b[0])
	}
	if !slices.Equal(names, []string{"added", "everything", "fake", "held"}) {
		t.Errorf("ListBackends after the reload: %v, want added, everything, fake, held", names)
	}
	status := c.Run(t, "mcpgatectl", "status")
	if !statusLineHealthy(status, "added") {
		t.Errorf("mcpgatectl status does not show added healthy:\n%s", status)
	}
	for name, pid := range before {
		if now := g.backendPID(t, name); now != pid {
			t.Errorf("backend %s's MainPID changed from %d to %d across the reload", name, pid, now)
		}
	}
	if now := g.mainPID(t); now != mainPID {
		t.Errorf("mcpgated's MainPID changed from %d to %d across the reload", mainPID, now)
	}
	tools := toolNames(t, g.client)
	if !slices.Contains(tools, "added__echo") || slices.Contains(tools, "held__echo") {
		t.Errorf("tools/list after the reload, held still in its handshake: %v; want added__echo, no held__echo", tools)
	}

	// The gate opens: held finishes its handshake and joins.
	gateAt := time.Now()
	c.Run(t, "sh", "-c", `echo '{"jsonrpc":"2.0","id":"gate","method":"initialize","params":{}}' >> `+heldRecord)
	g.awaitBackendReady(t, "held", gateAt)
	if tools := toolNames(t, g.client); !slices.Contains(tools, "held__echo") {
		t.Errorf("tools/list lacks held__echo once its handshake ended: %v", tools)
	}
	// Leave the gateway as the later steps expect it.
	c.Run(t, "rm", "/etc/mcpgate/conf.d/e2e-held.toml")
	c.Run(t, "systemctl", "reload", "mcpgate")
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("systemctl reload in %v returned with held in its handshake (%s): added is healthy (PID %d) in ListBackends, mcpgatectl status and tools/list; held joined once its gate opened; fake %d, everything %d, mcpgated %d unchanged",
		res.Elapsed.Round(time.Millisecond), heldState, added, before["fake"], before["everything"], mainPID)
}

// backendState reads a backend's State on D-Bus.
func (g *installedGateway) backendState(t *testing.T, name string) string {
	t.Helper()
	out := g.c.Run(t, "busctl", "get-property", busName, backendPath(name), backendIf, "State")
	return strings.Trim(strings.TrimPrefix(out, "s "), `"`)
}

// awaitBackendReady waits for the journal entry of backend name's
// handshake ending after since, and returns the backend's PID from it.
func (g *installedGateway) awaitBackendReady(t *testing.T, name string, since time.Time) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	e, err := g.c.AwaitJournal(ctx, func(e JournalEntry) bool { return realtime(e).After(since) },
		"--unit=mcpgate.service", "MESSAGE_ID="+journal.MessageBackendReady.String(), "MCPGATE_BACKEND="+name)
	if err != nil {
		t.Fatalf("backend %s did not become ready: %v", name, err)
	}
	pid, _ := strconv.Atoi(e["MCPGATE_BACKEND_PID"])
	return pid
}
