package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// idleConfig replaces every drop-in but the clients' for the idle-host step: both backends
// start on demand and stop when idle, and the gateway exits when nothing
// is left to serve.
var idleConfig = fmt.Sprintf(`# Written by internal/e2e (TestInstalledPackage, idle host).
[gateway]
idle_exit = "3s"
runner = "process"

[backends.fake]
command = %q
args = ["--name", "fake", "--handshake-delay", %q]
start = "on-demand"
idle_stop = "2s"

[backends.everything]
command = "/usr/local/bin/mcp-server-everything"
args = ["stdio"]
start = "on-demand"
idle_stop = "2s"
`, fakeBin, fakeHandshakeDelay.String())

// checkIdleHost: with on-demand backends, idle_stop and idle_exit, an idle
// host runs nothing but the socket systemd holds; the next client starts
// the gateway, which is ready from the catalog cache without starting a
// backend, and the first call starts the backend it needs.
func (g *installedGateway) checkIdleHost(t *testing.T) string {
	c := g.c
	// Every drop-in but the clients': the token of checkFirstClient stays.
	c.Run(t, "find", "/etc/mcpgate/conf.d", "-name", "*.toml", "!", "-name", "client-*.toml", "-delete")
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e.toml", []byte(idleConfig), 0o644)
	c.Run(t, "systemctl", "restart", "mcpgate.service") // fills the caches, then has nothing to do
	g.awaitIdleHost(t)
	for _, name := range []string{"fake", "everything"} {
		c.Run(t, "test", "-s", "/var/lib/mcpgate/catalog/"+name+".json")
	}

	// The next client starts the gateway; no backend runs until a call.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := time.Now()
	cs, err := g.connect(ctx)
	if err != nil {
		t.Fatalf("MCP client on the idle host: %v", err)
	}
	g.client = cs
	ready := time.Since(start)
	tools := toolNames(t, cs)
	procs := g.cgroupProcs(t)
	if !slices.Contains(tools, "fake__echo") || !slices.Contains(tools, "everything__echo") {
		t.Errorf("tools from the catalog cache: %v", tools)
	}
	if len(procs) != 1 || procs[0] != g.mainPID(t) {
		t.Errorf("before any call the service's cgroup holds %v, want mcpgated alone", procs)
	}
	start = time.Now()
	if got := callText(t, cs, "fake__echo", map[string]any{"text": "wake up"}); got != "wake up" {
		t.Errorf("fake__echo answered %q", got)
	}
	firstCall := time.Since(start)
	if n := len(g.cgroupProcs(t)); n != 2 {
		t.Errorf("after a call to fake the service's cgroup holds %d processes, want mcpgated and fake", n)
	}
	g.closeClient() // while the service runs (see closeClient)
	g.awaitIdleHost(t)
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("idle host: service inactive, cgroup empty, socket active; the next client was served in %v (the fake backend's handshake alone takes %v) with %d tools from the cache and no backend running; the first call started fake in %v; idle again after it",
		ready.Round(time.Millisecond), fakeHandshakeDelay, len(tools), firstCall.Round(time.Millisecond))
}

// awaitIdleHost waits until the gateway exited for idle_exit, and checks
// that nothing of it is left but the socket.
func (g *installedGateway) awaitIdleHost(t *testing.T) {
	t.Helper()
	c := g.c
	deadline := time.Now().Add(60 * time.Second)
	for g.activeState(t) != "inactive" {
		if time.Now().After(deadline) {
			t.Fatalf("mcpgate.service is %s, not inactive, 60s after it had nothing to do", g.activeState(t))
		}
		time.Sleep(200 * time.Millisecond) // systemd's state has no event to await here
	}
	props := g.show(t, "mcpgate.service", "Result", "ExecMainStatus")
	if props["Result"] != "success" || props["ExecMainStatus"] != "0" {
		t.Errorf("the idle exit ended the service with %v, want success and status 0", props)
	}
	if left := c.Run(t, "sh", "-c", "cat /sys/fs/cgroup/system.slice/mcpgate.service/cgroup.procs 2>/dev/null || true"); left != "" {
		t.Errorf("the idle service's cgroup still holds %q", left)
	}
	if procs, _ := c.Exec(t.Context(), nil, "pgrep", "-u", "mcpgate"); strings.TrimSpace(procs.Stdout) != "" {
		t.Errorf("processes of user mcpgate on the idle host: %s", procs.Stdout)
	}
	if state := c.Run(t, "systemctl", "show", "--property=ActiveState", "--value", "mcpgate.socket"); state != "active" {
		t.Errorf("mcpgate.socket is %s on the idle host, want active", state)
	}
}
