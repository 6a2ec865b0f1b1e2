package dbusapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// initialize opens an MCP session at url with token and returns the HTTP
// status: 200 when the token is let in, 401 when it is not.
func initialize(t *testing.T, url, token string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"dbusapi-test","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func managerChanged(cond func(map[string]dbus.Variant) bool) func(*dbus.Signal) bool {
	return func(s *dbus.Signal) bool {
		if s.Path != dbusapi.ManagerPath || s.Name != "org.freedesktop.DBus.Properties.PropertiesChanged" || len(s.Body) != 3 {
			return false
		}
		props, ok := s.Body[1].(map[string]dbus.Variant)
		return ok && s.Body[0] == dbusapi.ManagerInterface && cond(props)
	}
}

// TestClientsListenersAndTokens runs mcpgated with a client that has a
// configured token. The manager shows the listener it bound, and a
// session opening is announced in NSessions and NClients; ListClients
// shows the client, its session and when it was last seen, never its
// token. An unprivileged caller may not create or revoke tokens and is
// told why; root creates one, which is let in at once and kept only as a
// hash; revoked, it is refused from the next request on, also after a
// reload, while the configured token still works.
func TestClientsListenersAndTokens(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "needs root to run busctl as nobody")
	}
	const configured = "configured-token-4711"
	sum := sha256.Sum256([]byte(configured))
	state := t.TempDir()
	policy := filepath.Join(testutil.ModuleRoot(), "packaging", "dbus", "org.mcpgate.Gateway1.conf")
	g := startGatewayConfig(t, dbustest.Options{System: true, Include: []string{policy}}, fmt.Sprintf(`
[backends.alpha]
command = "FAKE"

[clients.ci]
token_sha256 = %q
tools = ["alpha__*"]
`, hex.EncodeToString(sum[:])), testutil.ConfigOptions{Auth: "required", Gateway: fmt.Sprintf("state_directory = %q", state)}, nil)
	url := g.daemon.URL
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")

	listeners := g.mustBusctl(t, "get-property", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "Listeners")
	if want := fmt.Sprintf("a(sss) 1 %q \"tcp\" \"config\"", addr); strings.TrimSpace(listeners) != want {
		t.Errorf("Listeners = %s, want %s", listeners, want)
	}
	m, err := g.client.Manager(ctx(t))
	if err != nil || m.NSessions != 0 || m.NClients != 0 {
		t.Fatalf("before any session: %+v, %v", m, err)
	}

	from := g.mark()
	if status := initialize(t, url, configured); status != http.StatusOK {
		t.Fatalf("initialize with the configured token: HTTP %d", status)
	}
	g.await(t, from, "NSessions 1 and NClients 1", managerChanged(func(p map[string]dbus.Variant) bool {
		return p["NSessions"].Value() == uint32(1) && p["NClients"].Value() == uint32(1)
	}))
	clients, err := g.client.ListClients(ctx(t))
	if err != nil || len(clients) != 1 {
		t.Fatalf("ListClients = %+v, %v", clients, err)
	}
	ci := clients[0]
	if ci.Name != "ci" || ci.NSessions != 1 || ci.Policy != "tools alpha__*" ||
		ci.Identity != "token sha256:"+hex.EncodeToString(sum[:])[:12]+"…" || len(ci.Tokens) != 0 {
		t.Errorf("ListClients: %+v", ci)
	}
	if seen := time.UnixMicro(int64(ci.LastSeenTimestamp)); time.Since(seen) > time.Hour || time.Until(seen) > time.Second {
		t.Errorf("last seen %v, want the initialize just now", seen)
	}
	if out := g.mustBusctl(t, "call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "ListClients"); strings.Contains(out, configured) {
		t.Errorf("ListClients shows the token: %s", out)
	}

	// Nobody (no polkit on this bus) is refused, with the reason.
	for _, args := range [][]string{{"CreateToken", "s", "ci"}, {"RevokeToken", "ss", "ci", "0123456789ab"}} {
		out, err := g.busctl(t, true, append([]string{"call", "--allow-interactive-authorization=no", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "access denied: uid 65534 is not root") || !strings.Contains(err.Error(), dbusapi.TokensAction) {
			t.Errorf("%s as nobody: %s, %v; want refused naming %s", args[0], out, err, dbusapi.TokensAction)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "tokens.json")); err == nil {
		t.Errorf("a refused CreateToken wrote tokens.json")
	}

	// Root creates a token; it is let in at once.
	out := g.mustBusctl(t, "--json=short", "call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "CreateToken", "s", "ci")
	var reply struct{ Data []string }
	if err := json.Unmarshal([]byte(out), &reply); err != nil || len(reply.Data) != 2 {
		t.Fatalf("CreateToken: %s, %v", out, err)
	}
	token, id := reply.Data[0], reply.Data[1]
	issuedSum := sha256.Sum256([]byte(token))
	if !strings.HasPrefix(token, "mcpgate_") || id != hex.EncodeToString(issuedSum[:])[:12] {
		t.Errorf("CreateToken = %q, %q; want a token and the start of its hash", token, id)
	}
	if status := initialize(t, url, token); status != http.StatusOK {
		t.Errorf("initialize with the issued token: HTTP %d", status)
	}
	if clients, err := g.client.ListClients(ctx(t)); err != nil || len(clients[0].Tokens) != 1 || clients[0].Tokens[0] != id ||
		clients[0].NSessions != 2 || !strings.Contains(clients[0].Identity, "1 issued token") {
		t.Errorf("ListClients after CreateToken: %+v, %v", clients, err)
	}
	file, err := os.ReadFile(filepath.Join(state, "tokens.json"))
	if err != nil || strings.Contains(string(file), token) || !strings.Contains(string(file), hex.EncodeToString(issuedSum[:])) {
		t.Errorf("tokens.json holds the token, or not its hash: %v\n%s", err, file)
	}

	// Another's id, or a configured token's, is not revoked.
	if err := g.client.RevokeToken(ctx(t), "ci", hex.EncodeToString(sum[:])[:12]); dbusapi.ErrorName(err) != dbusapi.ErrorNoSuchToken || !strings.Contains(err.Error(), "token_sha256") {
		t.Errorf("revoking the configured token: %v, want %s saying it is the configuration's", err, dbusapi.ErrorNoSuchToken)
	}
	if _, _, err := g.client.CreateToken(ctx(t), "nosuch"); dbusapi.ErrorName(err) != dbusapi.ErrorNoSuchClient {
		t.Errorf("CreateToken nosuch: %v, want %s", err, dbusapi.ErrorNoSuchClient)
	}

	g.mustBusctl(t, "call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "RevokeToken", "ss", "ci", id)
	if status := initialize(t, url, token); status != http.StatusUnauthorized {
		t.Errorf("initialize with the revoked token: HTTP %d, want 401", status)
	}
	if err := g.client.Reload(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if status := initialize(t, url, token); status != http.StatusUnauthorized {
		t.Errorf("initialize with the revoked token after a reload: HTTP %d, want 401", status)
	}
	if status := initialize(t, url, configured); status != http.StatusOK {
		t.Errorf("initialize with the configured token after the revocation: HTTP %d", status)
	}
	if strings.Contains(g.daemon.Stderr.String(), token) {
		t.Errorf("the daemon logged the issued token")
	}
}

// TestListClientsAuthNone: with auth = "none" every caller is client
// "anonymous", which ListClients shows with its sessions; no token is
// issued, since it would change nothing.
func TestListClientsAuthNone(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, `
[backends.alpha]
command = "FAKE"
`, "")
	if status := initialize(t, g.daemon.URL, "unused"); status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d", status)
	}
	clients, err := g.client.ListClients(ctx(t))
	if err != nil || len(clients) != 1 || clients[0].Name != "anonymous" || clients[0].NSessions != 1 || clients[0].LastSeenTimestamp == 0 {
		t.Fatalf("ListClients = %+v, %v; want anonymous with its session", clients, err)
	}
	if _, _, err := g.client.CreateToken(ctx(t), "anonymous"); err == nil || !strings.Contains(err.Error(), `auth = "none"`) {
		t.Errorf("CreateToken with auth none: %v, want refused saying why", err)
	}
}
