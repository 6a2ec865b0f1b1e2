package itest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// exchangeSetup runs the authorization server, the protected server (a
// second mcpgated whose clients are the users alice and bob and the
// gateway's client gw) and the gateway, whose backend "up" exchanges its
// callers' tokens (with more keys of its, if any) and whose clients are
// the users and "robot", with the static token robotToken. Tokens live
// ttl. metrics is the gateway's /metrics.
func exchangeSetup(t *testing.T, ttl time.Duration, more string) (as *authServer, up, gw *testutil.Daemon, record, metrics string) {
	t.Helper()
	as = startAuthServer(t, 0, ttl, newKey(t, "k1"))
	bins := testutil.Build(t)
	record = filepath.Join(t.TempDir(), "record")
	upstream, upURL := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %q
args = ["--record", %q]

[oauth.issuers.test]
issuer = %q

[clients.alice]
oauth_subjects = ["alice"]

[clients.bob]
oauth_subjects = ["bob"]

[clients.gateway]
oauth_subjects = ["gw"]
`, bins.Fake, record, as.Issuer), testutil.ConfigOptions{Auth: "required"})
	up = testutil.StartDaemon(t, upstream, upURL, testutil.DaemonOptions{})

	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "gw-secret"), []byte(gwSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(robotToken))
	port := testutil.FreePort(t)
	front, frontURL := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.up]
url = %[1]q
oauth_issuer = %[2]q
oauth_client_id = "gw"
oauth_client_secret_credential = "gw-secret"
oauth_token_exchange = true
oauth_scopes = ["mcp:read"]
%[4]s

[oauth.issuers.test]
issuer = %[2]q

[clients.users]
oauth_subjects = ["alice", "bob"]

[clients.robot]
token_sha256 = %[3]q
`, up.URL, as.Issuer, hex.EncodeToString(sum[:]), more), testutil.ConfigOptions{Auth: "required",
		Gateway: fmt.Sprintf("credentials_directory = %q\nmetrics_listen = \"127.0.0.1:%d\"", creds, port)})
	gw = testutil.StartDaemon(t, front, frontURL, testutil.DaemonOptions{})
	return as, up, gw, record, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
}

// robotToken is the static token of the gateway's client "robot": a
// caller without an OAuth identity.
const robotToken = "static-token-0123456789abcdef0123456789abcdef"

// echo calls the protected server's echo tool through s.
func echo(t *testing.T, s *mcp.ClientSession, text string) (*mcp.CallToolResult, error) {
	ctx := testutil.Context(t, 30*time.Second)
	return s.CallTool(ctx, &mcp.CallToolParams{Name: "up__a__echo", Arguments: map[string]any{"text": text}})
}

// upstreamCalls returns mcpgate_upstream_calls_total of backend up by as.
func upstreamCalls(t *testing.T, metrics string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, as := range []string{"exchanged", "service", "refused"} {
		got[as] = value(t, scrape(t, metrics), "mcpgate_upstream_calls_total", map[string]string{"backend": "up", "as": as})
	}
	return got
}

// TestTokenExchange: two users, each with an access token of the real
// authorization server (oidc-provider, its RFC 8693 grant registered in
// oauth-as.mjs), call the same remote backend through the gateway; the
// backend (another mcpgated, an OAuth resource server of that
// authorization server) sees each call as the user who made it, with a
// token the gateway got by exchanging the user's own: never the user's
// token itself, never the other user's subject, never the gateway's own
// client. A caller with a static token is refused with an error that
// says why. The gateway's audit entries name whom each call ran as.
func TestTokenExchange(t *testing.T) {
	as, up, gw, record, metrics := exchangeSetup(t, time.Hour, "")
	resource, tokenEndpoint := discover(t, gw.URL)
	tokens := map[string]string{
		"alice": as.token(t, tokenEndpoint, "alice", aliceSecret, resource, "mcp:read"),
		"bob":   as.token(t, tokenEndpoint, "bob", bobSecret, resource, "mcp:read"),
	}
	sessions := map[string]*mcp.ClientSession{}
	for _, u := range []string{"alice", "bob"} {
		sessions[u] = testutil.ConnectHTTP(t, gw.URL, tokenClient(tokens[u]), nil)
	}
	// Interleaved, so that a token kept for one user would show as the
	// other's.
	order := []string{"alice", "bob", "alice", "bob", "bob", "alice"}
	for i, u := range order {
		res, err := echo(t, sessions[u], fmt.Sprintf("%s-%d", u, i))
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		if err != nil {
			t.Fatalf("call %d of %s: %v\ngateway:\n%s\nupstream:\n%s", i, u, err, gw.Stderr.String(), up.Stderr.String())
		}
	}

	// The protected server's audit: each call as the user who made it,
	// in the order they were made. An entry is written as its call ends,
	// which may be after the answer reached the client.
	upAudit := regexp.MustCompile(`msg="audit: (\S+) tools/call a__echo: ok" client=\S+ identity=(\S+)`)
	up.Stderr.Await(t, 10*time.Second, "the protected server's audit of every call", func(s string) bool {
		return len(upAudit.FindAllString(s, -1)) >= len(order)
	})
	upLog := up.Stderr.String()
	var got []string
	for _, m := range upAudit.FindAllStringSubmatch(upLog, -1) {
		got = append(got, m[1]+"="+m[2])
	}
	var want []string
	for _, u := range order {
		want = append(want, u+"=oauth:test:sub:"+u)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the protected server's calls ran as %q, want %q\n%s", got, want, upLog)
	}
	// Each call stood alone at the server (2026-07-28), with its caller's
	// token: no session of the gateway's was taken over by a user.
	if strings.Contains(gw.Stderr.String(), "no longer knew the session") {
		t.Errorf("the gateway's session with the server was lost to a user's call:\n%s", gw.Stderr.String())
	}
	if strings.Contains(upLog, "refused a caller: invalid") {
		t.Errorf("the protected server refused a request:\n%s", upLog)
	}
	t.Logf("the protected server ran the calls as %q", got)
	// The exchange happened once per user, at the authorization server.
	gw.Stderr.Await(t, 10*time.Second, "the gateway's audit of every call", func(s string) bool {
		return strings.Count(s, "audit: users tools/call up__a__echo: ok") >= len(order)
	})
	gwLog := gw.Stderr.String()
	if n := strings.Count(gwLog, "exchanged the caller's access token for one for the backend"); n != 2 {
		t.Errorf("%d exchanges, want one per user, kept for their later calls:\n%s", n, gwLog)
	}
	// The gateway's audit names whom each call ran as upstream.
	for _, u := range []string{"alice", "bob"} {
		if n := regexp.MustCompile(`audit: users tools/call up__a__echo: ok".* identity=oauth:test:sub:`+u+` .*upstream=exchanged upstream_subject=`+u+` `).FindAllString(gwLog, -1); len(n) != 3 {
			t.Errorf("%d audit entries of %s's calls naming %s upstream, want 3:\n%s", len(n), u, u, gwLog)
		}
	}

	// A caller with a static token has no OAuth identity to exchange.
	robot := testutil.ConnectHTTP(t, gw.URL, tokenClient(robotToken), nil)
	res, err := echo(t, robot, "robot")
	msg := fmt.Sprint(err)
	if err == nil {
		msg = fmt.Sprintf("%+v", res.Content)
	}
	if err == nil && !res.IsError || !strings.Contains(msg, "has no OAuth access token to exchange") || !strings.Contains(msg, "oauth_exchange_fallback") {
		t.Errorf("a call with a static token: %s; want a refusal that says why", msg)
	}
	gw.Stderr.Await(t, 10*time.Second, "the refusal journaled", func(s string) bool {
		return strings.Contains(s, "has no OAuth access token to exchange") && strings.Contains(s, "identity=token:")
	})
	if strings.Contains(up.Stderr.String(), "client=gateway identity=oauth:test:sub:gw") && strings.Contains(up.Stderr.String(), "audit: gateway tools/call") {
		t.Errorf("the robot's call reached the protected server as the gateway")
	}

	// No user's token reached the protected server, the recording backend
	// or a log.
	for u, tok := range tokens {
		tail := tok[len(tok)-24:]
		for where, text := range map[string]string{"the protected server's log": up.Stderr.String(), "the gateway's log": gw.Stderr.String(), "the backend": readFile(t, record)} {
			if strings.Contains(text, tail) {
				t.Errorf("%s's token reached %s", u, where)
			}
		}
	}
	if strings.Contains(gw.Stderr.String(), "eyJ") {
		t.Errorf("a token shows in the gateway's log")
	}
	if got, want := upstreamCalls(t, metrics), map[string]float64{"exchanged": 6, "service": 0, "refused": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mcpgate_upstream_calls_total by as: %v, want %v", got, want)
	}
}

// TestTokenExchangeFallback: with oauth_exchange_fallback = "service", a
// caller without an OAuth identity is served as the gateway's own client,
// and says so in the audit and the metrics; a user still runs as
// themselves.
func TestTokenExchangeFallback(t *testing.T) {
	as, up, gw, _, metrics := exchangeSetup(t, time.Hour, `oauth_exchange_fallback = "service"`)
	robot := testutil.ConnectHTTP(t, gw.URL, tokenClient(robotToken), nil)
	if res, err := echo(t, robot, "robot"); err != nil || res.IsError {
		t.Fatalf("the robot's call: %v %+v\n%s", err, res, gw.Stderr.String())
	}
	resource, tokenEndpoint := discover(t, gw.URL)
	alice := testutil.ConnectHTTP(t, gw.URL, tokenClient(as.token(t, tokenEndpoint, "alice", aliceSecret, resource, "mcp:read")), nil)
	if res, err := echo(t, alice, "alice"); err != nil || res.IsError {
		t.Fatalf("alice's call: %v %+v\n%s", err, res, gw.Stderr.String())
	}
	up.Stderr.Await(t, 10*time.Second, "the protected server's audit: the robot as the gateway, alice as herself", func(s string) bool {
		return strings.Contains(s, `msg="audit: gateway tools/call a__echo: ok" client=gateway identity=oauth:test:sub:gw`) &&
			strings.Contains(s, `msg="audit: alice tools/call a__echo: ok" client=alice identity=oauth:test:sub:alice`)
	})
	gw.Stderr.Await(t, 10*time.Second, "the gateway's audit: the robot's call ran as the service", func(s string) bool {
		return regexp.MustCompile(`audit: robot tools/call up__a__echo: ok".* identity=token:\S+ .*upstream=service `).MatchString(s)
	})
	if got, want := upstreamCalls(t, metrics), map[string]float64{"exchanged": 1, "service": 1, "refused": 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mcpgate_upstream_calls_total by as: %v, want %v", got, want)
	}
}

// TestTokenExchangeRenewal: an exchanged token is exchanged again before
// it expires, every call succeeding meanwhile, and still as its user.
func TestTokenExchangeRenewal(t *testing.T) {
	as, up, gw, _, _ := exchangeSetup(t, 4*time.Second, "")
	resource, tokenEndpoint := discover(t, gw.URL)
	exchanges := func() int {
		return strings.Count(gw.Stderr.String(), `exchanged the caller's access token for one for the backend" backend=up identity=oauth:test:sub:alice`)
	}
	// Alice's own tokens live 4s too: each call comes with a fresh one,
	// as a client that refreshes its token would send it.
	var callErr error
	calls := 0
	renewed := testutil.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		s := testutil.ConnectHTTP(t, gw.URL, tokenClient(as.token(t, tokenEndpoint, "alice", aliceSecret, resource, "mcp:read")), nil)
		res, err := echo(t, s, "renewal")
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		if err != nil && callErr == nil {
			callErr = err
		}
		s.Close()
		calls++
		return exchanges() >= 2
	})
	if !renewed {
		t.Errorf("alice's exchanged token was not renewed within 30s")
	}
	if callErr != nil {
		t.Errorf("a call failed while the exchanged token was renewed: %v\n%s", callErr, gw.Stderr.String())
	}
	if calls < 3 {
		t.Errorf("renewed after %d calls: the exchanged token was not kept between them", calls)
	}
	up.Stderr.Await(t, 10*time.Second, "every call in the protected server's audit as alice", func(s string) bool {
		return strings.Count(s, `msg="audit: alice tools/call a__echo: ok" client=alice identity=oauth:test:sub:alice`) >= calls
	})
	if strings.Contains(up.Stderr.String(), "audit: gateway tools/call") {
		t.Errorf("a call reached the protected server as the gateway's client")
	}
}
