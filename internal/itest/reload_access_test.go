package itest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestReloadRestrictsBeforeNewBackends: a reload's new client set and
// policies are in force before any of its new backends can be listed or
// called. The reload adds a backend whose tools narrow's new policy
// forbids (secret, quick to start) and one whose handshake the test holds
// (slow); while slow is still in its handshake, secret's tools are listed
// for an unrestricted client, but narrow neither sees nor calls them, and
// the token of a client the reload removed is refused.
func TestReloadRestrictsBeforeNewBackends(t *testing.T) {
	bins := testutil.Build(t)
	const goneToken = "mcpgate_itest_gone_0123456789"
	record := filepath.Join(t.TempDir(), "slow.record")
	clients := func(narrowTools string, gone bool) string {
		s := fmt.Sprintf(`
[clients.full]
token_sha256 = %q

[clients.narrow]
token_sha256 = %q
tools = %s
`, sha256Hex(fullToken), sha256Hex(narrowToken), narrowTools)
		if gone {
			s += fmt.Sprintf("\n[clients.gone]\ntoken_sha256 = %q\n", sha256Hex(goneToken))
		}
		return s
	}
	a := fmt.Sprintf("\n[backends.a]\ncommand = %q\nargs = [\"--tools\", \"alpha\"]\n", bins.Fake)
	toml, url := testutil.ConfigWith(t, a+clients(`["*"]`, true), testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	full := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), nil)
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), nil)
	if resp, body := exchange(t, http.DefaultClient, d.URL, initializeBody, "Authorization", "Bearer "+goneToken); resp.StatusCode != 200 {
		t.Fatalf("client gone before the reload: HTTP %d %s", resp.StatusCode, body)
	}

	// slow answers initialize only once its record file holds two
	// initialize requests: its own, and the one this test appends.
	added := fmt.Sprintf(`
[backends.secret]
command = %[1]q
args = ["--tools", "delete_everything"]

[backends.slow]
command = %[1]q
args = ["--tools", "later", "--record", %[2]q, "--initialize-barrier", "2"]
`, bins.Fake, record)
	newToml := strings.Replace(toml, clients(`["*"]`, true), added+clients(`["*", "!secret__*"]`, false), 1)
	if newToml == toml {
		t.Fatal("the test could not rewrite the configuration")
	}
	if err := os.WriteFile(d.ConfigPath, []byte(newToml), 0o644); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		f, err := os.OpenFile(record, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Errorf("releasing slow's handshake: %v", err)
			return
		}
		defer f.Close()
		fmt.Fprintln(f, `{"jsonrpc":"2.0","id":"test","method":"initialize"}`)
	}
	t.Cleanup(release) // a reload must not stay stuck if the test fails early
	from := d.Notify.Mark(t)
	d.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 60*time.Second, "slow's initialize request", func() bool {
		b, _ := os.ReadFile(record)
		return strings.Contains(string(b), `"initialize"`)
	})
	testutil.Eventually(t, 60*time.Second, "secret's tool listed for full", func() bool {
		return testutil.ToolNames(t, full)["secret__delete_everything"]
	})

	// slow is still in its handshake (the reload is applied without
	// waiting for it): its tools are not there yet.
	if tools := testutil.ToolNames(t, narrow); tools["secret__delete_everything"] || !tools["a__alpha"] {
		t.Errorf("narrow's tools during the reload = %v; want a__alpha and nothing of secret", tools)
	}
	if res, err := testutil.CallTool(t, narrow, "secret__delete_everything", nil); err == nil && !res.IsError {
		t.Errorf("narrow called secret__delete_everything during the reload: %q", testutil.ToolText(res))
	}
	fresh := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), nil)
	if tools := testutil.ToolNames(t, fresh); tools["secret__delete_everything"] {
		t.Errorf("a new session of narrow during the reload lists secret's tool: %v", tools)
	}
	if resp, body := exchange(t, http.DefaultClient, d.URL, initializeBody, "Authorization", "Bearer "+goneToken); resp.StatusCode != 401 {
		t.Errorf("the removed client's token during the reload: HTTP %d %s, want 401", resp.StatusCode, body)
	}

	release()
	d.AwaitNotify(t, from, 60*time.Second, "READY=1 after the reload", testutil.Has("READY=1"))
	testutil.Eventually(t, 60*time.Second, "slow's tool listed once its handshake ended", func() bool {
		return testutil.ToolNames(t, full)["slow__later"]
	})
	if tools := testutil.ToolNames(t, narrow); tools["secret__delete_everything"] {
		t.Errorf("narrow's tools after the reload = %v; want nothing of secret", tools)
	}
}

// TestReloadEndsSubscriptionsThePolicyHides: a reload that narrows a
// client's resources ends its sessions' subscriptions to what it may no
// longer read, at the backend too: it hears of no more updates to it.
// Before, the subscription lived on and its updates reached the client.
func TestReloadEndsSubscriptionsThePolicyHides(t *testing.T) {
	bins := testutil.Build(t)
	clients := func(resources string) string {
		return fmt.Sprintf("\n[clients.narrow]\ntoken_sha256 = %q\nresources = %s\n\n[clients.full]\ntoken_sha256 = %q\n",
			sha256Hex(narrowToken), resources, sha256Hex(fullToken))
	}
	a := fmt.Sprintf("\n[backends.a]\ncommand = %q\nargs = [\"--resources\", \"2\"]\n", bins.Fake)
	toml, url := testutil.ConfigWith(t, a+clients(`["*"]`), testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), nil)
	full := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), nil)
	ctx := testutil.Context(t, 30*time.Second)
	if err := narrow.Subscribe(ctx, &mcp.SubscribeParams{URI: "fake://r/0"}); err != nil {
		t.Fatal(err)
	}
	subscribed := func() bool {
		res := testutil.MustCallTool(t, full, "a__touch", map[string]any{"uri": "fake://r/0"})
		sc, _ := res.StructuredContent.(map[string]any)
		return sc["subscribed"] == true
	}
	if !subscribed() {
		t.Fatal("the backend is not subscribed after narrow's subscribe")
	}
	if err := os.WriteFile(d.ConfigPath, []byte(strings.Replace(toml, clients(`["*"]`), clients(`["fake://r/1"]`), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	awaitLog(t, d, "configuration reloaded")
	testutil.Eventually(t, 10*time.Second, "the backend unsubscribed", func() bool { return !subscribed() })
}
