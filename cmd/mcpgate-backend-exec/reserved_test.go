package main

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
)

// TestReservedEnvNotPassed: the variables systemd sets for the unit that
// mcpgate.toml(5) reserves (JOURNAL_STREAM above all: the unit's stderr is
// the journal, the server's is mcpgated's pipe) do not reach the server;
// the rest of the unit's environment does.
func TestReservedEnvNotPassed(t *testing.T) {
	var unitEnv []string
	for _, name := range config.ReservedEnv() {
		unitEnv = append(unitEnv, name+"=from-the-unit")
	}
	conn, cmd := helper(t, append(unitEnv, "INVOCATION_ID=abc")...)
	ours, theirs := pipes(t)
	if err := wire.Send(conn, wire.Spec{Argv: []string{"env"}}, theirs); err != nil {
		t.Fatal(err)
	}
	for _, f := range theirs {
		f.Close()
	}
	conn.CloseWrite()
	if said, _ := io.ReadAll(conn); len(said) != 0 {
		t.Fatalf("the helper said %q", said)
	}
	got := map[string]bool{}
	sc := bufio.NewScanner(ours[1])
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), "=")
		got[name] = true
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server: %v", err)
	}
	for _, name := range config.ReservedEnv() {
		if got[name] {
			t.Errorf("the server got the reserved %s", name)
		}
	}
	for _, name := range []string{"INVOCATION_ID", "HOME", "PATH"} {
		if !got[name] {
			t.Errorf("the server lacks the unit's %s", name)
		}
	}
}
