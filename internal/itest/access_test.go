package itest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Tokens of the clients of accessGateway.
const (
	fullToken   = "mcpgate_itest_full_0123456789"
	narrowToken = "mcpgate_itest_narrow_0123456789"
	cappedToken = "mcpgate_itest_capped_0123456789"
	wrongToken  = "mcpgate_itest_wrong_0123456789"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// accessGateway runs mcpgated with auth = "required" on TCP and a unix
// socket, two fake backends a and b, and four clients: full (a token, no
// restriction), narrow (a token; sees only a's tools and prompts and one
// resource), capped (a token, one session, 3 requests an hour) and local
// (root on the unix socket).
func accessGateway(t *testing.T) (d *testutil.Daemon, socket string) {
	t.Helper()
	bins := testutil.Build(t)
	backends := fmt.Sprintf(`
[backends.a]
command = %[1]q
args = ["--tools", "alpha", "--prompts", "--resources", "2"]

[backends.b]
command = %[1]q
args = ["--tools", "beta", "--prompts"]

# A composite whose step is a tool of b: narrow may see the composite
# but not the step's tool.
[composites.via_b]
steps = [{ tool = "b__echo", arguments = { text = "through b" } }]

[clients.full]
token_sha256 = %[2]q

[clients.narrow]
token_sha256 = %[3]q
tools = ["*", "!b__*"]
prompts = ["a__*"]
resources = ["fake://r/0"]

[clients.capped]
token_sha256 = %[4]q
max_sessions = 1
rate_limit = "3/1h"

[clients.local]
unix_users = ["root"]
`, bins.Fake, sha256Hex(fullToken), sha256Hex(narrowToken), sha256Hex(cappedToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	dir := testutil.ShortTempDir(t)
	socket = filepath.Join(dir, "mcpgate.sock")
	toml = strings.Replace(toml, "listen = [", fmt.Sprintf("listen = [%q, ", "unix:"+socket), 1)
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{}), socket
}

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func tokenClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token, http.DefaultTransport}}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"itest","version":"1"}}}`

// exchange POSTs body to url through hc with the given headers and returns
// the response with its body read.
func exchange(t testing.TB, hc *http.Client, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAccessIdentities checks who is let in, over TCP and the unix socket,
// and that refusals say why, are journaled with the peer and never the
// token.
func TestAccessIdentities(t *testing.T) {
	d, socket := accessGateway(t)
	unix := testutil.UnixHTTPClient(socket)
	unixURL := "http://localhost/mcp"
	tests := []struct {
		name       string
		hc         *http.Client
		url        string
		token      string
		wantStatus int
		wantBody   string // in the answer
		wantBearer bool   // WWW-Authenticate: Bearer
	}{
		{"no token over TCP", http.DefaultClient, d.URL, "", 401, "no bearer token", true},
		{"wrong token over TCP", http.DefaultClient, d.URL, wrongToken, 401, "wrong bearer token", true},
		{"not a bearer token over TCP", http.DefaultClient, d.URL, "", 401, "not a bearer token", true},
		{"right token over TCP", http.DefaultClient, d.URL, fullToken, 200, `"serverInfo"`, false},
		{"right token over the unix socket", unix, unixURL, narrowToken, 200, `"serverInfo"`, false},
		{"wrong token over the unix socket, even from root", unix, unixURL, wrongToken, 401, "wrong bearer token", true},
		{"peer credentials of root over the unix socket", unix, unixURL, "", 200, `"serverInfo"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			switch {
			case tc.token != "":
				headers = []string{"Authorization", "Bearer " + tc.token}
			case strings.HasPrefix(tc.name, "not a bearer"):
				headers = []string{"Authorization", "Basic dXNlcjpwYXNz"}
			}
			resp, body := exchange(t, tc.hc, tc.url, initializeBody, headers...)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("HTTP %d %s, want %d with %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if got := resp.Header.Get("WWW-Authenticate"); tc.wantBearer != strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge: %v", got, tc.wantBearer)
			}
			if tc.wantStatus == 200 && resp.Header.Get("Mcp-Session-Id") == "" {
				t.Error("no Mcp-Session-Id")
			}
		})
	}
	d.Stderr.Await(t, 10*time.Second, "journaled refusals", func(out string) bool {
		return strings.Count(out, "refused a caller") >= 4
	})
	out := d.Stderr.String()
	for _, want := range []string{"message_id=e2c7994b55374c46a1e6b91578c0d764", "peer=127.0.0.1:", "peer=\"uid 0 pid ", "http_status=401"} {
		if !strings.Contains(out, want) {
			t.Errorf("the daemon's log has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, wrongToken) {
		t.Errorf("the daemon logged a token:\n%s", out)
	}
}

// TestAccessRefusedUID runs a client as a user no client lists, with
// setpriv, over the unix socket: it gets 403 with what to do.
func TestAccessRefusedUID(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "needs root to add a user and to change uid with setpriv")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testutil.Unavailable(t, "setpriv (util-linux) not installed: %v", err)
	}
	d, socket := accessGateway(t)
	name := fmt.Sprintf("mgtest%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		testutil.Unavailable(t, "useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	// Let the other user reach the socket: the refusal must come from the
	// gateway, not from the file mode.
	os.Chmod(filepath.Dir(socket), 0o755)
	os.Chmod(socket, 0o666)
	bins := testutil.Build(t)
	os.Chmod(bins.Dir, 0o755)
	os.Chmod(bins.Ctl, 0o755)

	cmd := exec.CommandContext(testutil.Context(t, 60*time.Second), setpriv, "--reuid="+u.Uid, "--regid="+u.Gid, "--clear-groups",
		bins.Ctl, "bridge", "--socket", socket)
	cmd.Stdin = strings.NewReader(initializeBody + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge as %s: %v\nstdout %s\nstderr %s", name, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "matches no client") || !strings.Contains(stdout.String(), name) {
		t.Errorf("bridge as %s answered %s, want an error saying the user matches no client", name, stdout.String())
	}
	d.Stderr.Await(t, 10*time.Second, "a journaled 403", func(out string) bool {
		return strings.Contains(out, "http_status=403") && strings.Contains(out, "peer=\"uid "+u.Uid+" pid ")
	})

	// The same user with the token of a client gets in: a token is an
	// identity of its own.
	tokenFile := filepath.Join(testutil.ShortTempDir(t), "token")
	os.WriteFile(tokenFile, []byte(fullToken+"\n"), 0o644)
	os.Chmod(filepath.Dir(tokenFile), 0o755)
	cmd = exec.CommandContext(testutil.Context(t, 60*time.Second), setpriv, "--reuid="+u.Uid, "--regid="+u.Gid, "--clear-groups",
		bins.Ctl, "bridge", "--socket", socket, "--token-file", tokenFile)
	cmd.Stdin = strings.NewReader(initializeBody + "\n")
	stdout.Reset()
	cmd.Stdout = &stdout
	stderr.Reset()
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge --token-file as %s: %v\n%s", name, err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"serverInfo"`) {
		t.Errorf("bridge --token-file answered %s, want the initialize result", stdout.String())
	}
}

// TestAccessSessionBelongsToItsIdentity: another identity presenting a
// session's id gets 404, as for a session that does not exist.
func TestAccessSessionBelongsToItsIdentity(t *testing.T) {
	d, socket := accessGateway(t)
	resp, _ := exchange(t, http.DefaultClient, d.URL, initializeBody, "Authorization", "Bearer "+fullToken)
	id := resp.Header.Get("Mcp-Session-Id")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	tests := []struct {
		name  string
		hc    *http.Client
		url   string
		token string
		want  int
	}{
		{"its own identity", http.DefaultClient, d.URL, fullToken, 200},
		{"another token", http.DefaultClient, d.URL, narrowToken, 404},
		{"peer credentials of another client", testutil.UnixHTTPClient(socket), "http://localhost/mcp", "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{"Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18"}
			if tc.token != "" {
				headers = append(headers, "Authorization", "Bearer "+tc.token)
			}
			resp, body := exchange(t, tc.hc, tc.url, list, headers...)
			if resp.StatusCode != tc.want {
				t.Errorf("HTTP %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want == 404 && !strings.Contains(body, "not found") {
				t.Errorf("body %s does not read like an unknown session's", body)
			}
		})
	}
}
