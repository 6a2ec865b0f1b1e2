package itest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestOAuthTypeScriptSDK: the TypeScript MCP SDK's OAuth client support
// (ClientCredentialsProvider) completes its discovery against mcpgate's
// 401 and metadata, gets its token from the authorization server itself
// and lists the tools its client may see.
func TestOAuthTypeScriptSDK(t *testing.T) {
	as := startAuthServer(t, 0, time.Hour, newKey(t, "k1"))
	d := oauthGateway(t, as, filepath.Join(t.TempDir(), "record"), "1h")
	sdk := filepath.Join(testutil.CacheDir(), "npm", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm")
	if _, err := os.Stat(sdk); err != nil {
		testutil.Unavailable(t, "@modelcontextprotocol/sdk is not installed (packaging/ci/deps.sh): %v", err)
	}
	cmd := exec.Command("node", filepath.Join(testutil.ModuleRoot(), "internal", "itest", "testdata", "oauth-sdk-client.mjs"))
	cmd.Env = append(os.Environ(), "SDK="+sdk, "MCP_URL="+d.URL, "CLIENT_ID=svc", "CLIENT_SECRET="+svcSecret, "ISSUER="+as.Issuer, "SCOPE=mcp:read")
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	exit := testutil.StartExit(t, cmd)
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("the SDK client failed: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the SDK client did not finish:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[len(lines)-1] != "ok" || !strings.Contains(out.String(), "a__echo") || strings.Contains(out.String(), "b__echo") {
		t.Errorf("the SDK client's output, want a's tools only, then ok:\n%s", out.String())
	}
}

// TestOAuthSessionRevalidated: a 2025 session belongs to the identity of
// the token that initialized it, and every later request is validated
// again: without a token, with an expired one or as another client, the
// session is out of reach.
func TestOAuthSessionRevalidated(t *testing.T) {
	key := newKey(t, "k1")
	as := startAuthServer(t, 0, time.Hour, key)
	d := oauthGateway(t, as, filepath.Join(t.TempDir(), "record"), "1h")
	resource, tokenEndpoint := discover(t, d.URL)
	token := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	resp, body := exchange(t, tokenClient(token), d.URL, initializeBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	expired := as.sign(t, key, map[string]any{"iss": as.Issuer, "sub": "svc", "aud": resource, "scope": "mcp:read",
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})
	tests := []struct {
		name   string
		hc     *http.Client
		status int
	}{
		{"the same token", tokenClient(token), http.StatusOK},
		{"no token", http.DefaultClient, http.StatusUnauthorized},
		{"an expired token of the same subject", tokenClient(expired), http.StatusUnauthorized},
		{"another client's static token", tokenClient(fullToken), http.StatusNotFound},
		{"a new token of the same subject", tokenClient(as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")), http.StatusOK},
	}
	for _, tc := range tests {
		resp, body := exchange(t, tc.hc, d.URL, list, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18")
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s, want %d: %s", tc.name, resp.Status, tc.status, body)
		}
	}
}

// TestSessionsBelongToTheIdentity: two OAuth users whose groups map them
// to one client are one client with two identities. Neither can use the
// other's Mcp-Session-Id or requestState, and the audit and the journal
// name who called. Before, both were bound to the client's name only.
func TestSessionsBelongToTheIdentity(t *testing.T) {
	as := startAuthServer(t, 0, time.Hour, newKey(t, "k1"))
	bins := testutil.Build(t)
	record := filepath.Join(t.TempDir(), "fake.jsonl")
	toml, u := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.fake]
command = %q
args = ["--record", %q]

[oauth.issuers.test]
issuer = %q

[clients.team]
oauth_groups = ["team"]
`, bins.Fake, record, as.Issuer), testutil.ConfigOptions{Auth: "required", Gateway: "audit = \"calls\""})
	d := testutil.StartDaemon(t, toml, u, testutil.DaemonOptions{})
	token := func(sub string) string {
		now := time.Now()
		return as.sign(t, as.keys[0], map[string]any{"iss": as.Issuer, "sub": sub, "aud": d.URL, "groups": []string{"team"},
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	}
	alice, bob := token("alice"), token("bob")

	resp, _ := exchange(t, tokenClient(alice), d.URL, initializeBody)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("alice's initialize: %s", resp.Status)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp, body := exchange(t, tokenClient(bob), d.URL, list, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob with alice's session: %s %s; want 404", resp.Status, body)
	}
	if resp, body := exchange(t, tokenClient(alice), d.URL, list, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusOK {
		t.Errorf("alice with her session: %s %s", resp.Status, body)
	}

	gw := &inputGW{d: d, fakeRecord: record}
	a := gw.call(t, alice, 3, "fake__sample", `{}`, samplingCaps, "")
	key, state := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"], a.Result.RequestState
	responses := map[string]string{key: `{"role":"assistant","content":{"type":"text","text":"from alice"},"model":"m"}`}
	mustRefuse(t, gw.call(t, bob, 4, "fake__sample", `{}`, samplingCaps, retryParams(responses, state)), "other-client")
	if b := gw.call(t, alice, 5, "fake__sample", `{}`, samplingCaps, retryParams(responses, state)); b.Error != nil || b.Result.ResultType != "complete" {
		t.Fatalf("alice's retry: %s", b.raw)
	}
	d.Stderr.Await(t, 10*time.Second, "alice's audit entry naming her", func(out string) bool {
		return containsAll(out, "client=team identity=oauth:test:sub:alice", "tool=fake__sample", "outcome=ok")
	})
	// The refusal of bob's retry names him, and the stateless request.
	d.Stderr.Await(t, 10*time.Second, "the refusal naming bob and his request", func(out string) bool {
		for _, line := range strings.Split(out, "\n") {
			if containsAll(line, "message_id="+journal.MessageAccessDenied.String(), "identity=oauth:test:sub:bob", " request=r") {
				return true
			}
		}
		return false
	})
	for _, line := range strings.Split(d.Stderr.String(), "\n") {
		if containsAll(line, "message_id="+journal.MessageAudit.String(), "identity=oauth:test:sub:bob") {
			t.Errorf("bob's refused retry was audited as a call: %s", line)
		}
	}
}
