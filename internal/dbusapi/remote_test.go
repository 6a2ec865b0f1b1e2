package dbusapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// TestRemoteBackendShowsURLNeverCredentials: a remote backend shows its URL's
// origin on D-Bus and in mcpgatectl status instead of a PID, and the token
// its header sends, or a key in its URL's path or query, appears nowhere:
// not on D-Bus, not in status, not in the daemon's output at debug level,
// even when the server refuses the token and echoes it back.
func TestRemoteBackendShowsURLNeverCredentials(t *testing.T) {
	const token, key, pathKey = "t0ken-in-a-header-0815", "k3y-in-the-query-4711", "k3y-in-the-path-2342"
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "up-token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse/"+pathKey || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "refused "+r.Header.Get("Authorization")+" for "+r.URL.Path+"?"+r.URL.RawQuery, http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	g := startGatewayEnv(t, dbustest.Options{}, fmt.Sprintf(`
[backends.up]
url = "%[1]s/mcp/%[3]s?key=%[2]s"
headers = { Authorization = "Bearer ${credential:up-token}" }

[backends.refused]
url = "%[1]s/refuse/%[3]s?key=%[2]s"
headers = { Authorization = "Bearer ${credential:up-token}" }
max_restarts = 0
`, ts.URL, key, pathKey), fmt.Sprintf("credentials_directory = %q", creds), nil)

	testutil.Eventually(t, 30*time.Second, "refused has failed", func() bool {
		st, err := g.client.Backend(ctx(t), "refused")
		return err == nil && st.State == "failed"
	})
	wantURL := ts.URL
	if st, err := g.client.Backend(ctx(t), "up"); err != nil || st.URL != wantURL || len(st.Command) != 0 {
		t.Errorf("URL = %q, Command %q (%v); want %q and no command", st.URL, st.Command, err, wantURL)
	}
	if got := g.property(t, "up", "MainPID"); got != "u 0" {
		t.Errorf("MainPID of a remote backend = %s, want 0", got)
	}
	if got := g.property(t, "up", "State"); got != `s "healthy"` {
		t.Errorf("State = %s, want healthy", got)
	}

	var seen []string
	for _, name := range []string{"up", "refused"} {
		seen = append(seen, g.mustBusctl(t, "--json=short", "call", dbusapi.BusName, string(dbusapi.BackendPath(name)),
			"org.freedesktop.DBus.Properties", "GetAll", "s", dbusapi.BackendInterface))
	}
	bins := testutil.Build(t)
	for _, args := range [][]string{{"status", "--json"}, {"status"}, {"status", "up"}, {"status", "refused"}} {
		cmd := exec.Command(bins.Ctl, args...)
		cmd.Env = testutil.Env("DBUS_SYSTEM_BUS_ADDRESS=" + g.bus.Address)
		out, _ := cmd.CombinedOutput() // refused is not healthy: exit 3
		seen = append(seen, string(out))
	}
	if status := seen[len(seen)-2]; !strings.Contains(status, "URL: "+wantURL) {
		t.Errorf("mcpgatectl status up shows no URL:\n%s", status)
	}
	if refused := seen[len(seen)-1]; !strings.Contains(refused, "401") {
		t.Errorf("mcpgatectl status refused does not say why:\n%s", refused)
	}
	seen = append(seen, g.daemon.Stderr.String())
	for i, text := range seen {
		for _, secret := range []string{token, key, pathKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%q is shown (source %d):\n%s", secret, i, text)
			}
		}
	}
}
