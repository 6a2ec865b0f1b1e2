package access

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestIssuedTokens: a token issued for a configured client identifies it
// at once, in the set in effect and in one built after a restart from the
// same state directory; the file holds its hash, never the token; revoking
// it is refused from the next request on, and after a restart too; the
// client's configured token is untouched throughout; a client the
// configuration drops loses its issued tokens.
func TestIssuedTokens(t *testing.T) {
	state := t.TempDir()
	cfg, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `[clients.ci]
token_sha256 = "` + sha("configured-token") + `"
tools = ["github__*"]
[clients.other]
unix_users = ["0"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	issued, err := OpenIssued(state)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := NewSet(cfg, Options{Issued: issued})
	identify := func(set *Set, token string) string {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, "http://localhost/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		c, refusal := set.Identify(r, Peer{Addr: "127.0.0.1:1"})
		if refusal != nil {
			return "refused: " + refusal.Reason
		}
		if c.Identity != TokenIdentity(mustHex(t, sha(token))) {
			return "identity " + c.Identity
		}
		return c.Client.Name
	}
	token, tok, err := issued.Create("ci", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := identify(set, token); !strings.HasPrefix(got, "refused") {
		t.Fatalf("before RefreshIssued the set in effect took the token: %s", got)
	}
	set.RefreshIssued("ci")
	if got := identify(set, token); got != "ci" {
		t.Fatalf("the issued token is %s, want client ci", got)
	}
	if tok.ID != sha(token)[:12] || tok.SHA256 != sha(token) {
		t.Errorf("id %q, hash %q: want the start of the token's SHA-256 and the hash", tok.ID, tok.SHA256)
	}
	if c := set.Client("ci"); c.LastSeen().IsZero() || c.IssuedTokens() != 1 {
		t.Errorf("ci: last seen %v, %d issued tokens; want now and 1", c.LastSeen(), c.IssuedTokens())
	}
	b, err := os.ReadFile(filepath.Join(state, IssuedFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), token) || !strings.Contains(string(b), sha(token)) {
		t.Errorf("%s holds the token or lacks its hash:\n%s", IssuedFile, b)
	}
	if fi, _ := os.Stat(filepath.Join(state, IssuedFile)); fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("%s has mode %v; others may read it", IssuedFile, fi.Mode().Perm())
	}

	// A restart: a new store from the same directory, a new set.
	restarted := func() *Set {
		t.Helper()
		issued, err := OpenIssued(state)
		if err != nil {
			t.Fatal(err)
		}
		set, _ := NewSet(cfg, Options{Issued: issued})
		return set
	}
	if got := identify(restarted(), token); got != "ci" {
		t.Fatalf("after a restart the issued token is %s, want client ci", got)
	}
	if ok, err := issued.Revoke("ci", tok.ID); !ok || err != nil {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	set.RefreshIssued("ci")
	if got := identify(set, token); !strings.HasPrefix(got, "refused: wrong bearer token") {
		t.Errorf("the revoked token is %s, want refused", got)
	}
	if got := identify(restarted(), token); !strings.HasPrefix(got, "refused") {
		t.Errorf("after a restart the revoked token is %s, want refused", got)
	}
	if got := identify(set, "configured-token"); got != "ci" {
		t.Errorf("the configured token is %s after the revocation, want client ci", got)
	}
	if ok, err := issued.Revoke("ci", tok.ID); ok || err != nil {
		t.Errorf("revoking again = %v, %v; want false", ok, err)
	}

	// A client the configuration no longer has loses its tokens.
	if _, _, err := issued.Create("other", time.Now()); err != nil {
		t.Fatal(err)
	}
	dropped, err := issued.Prune([]string{"ci"})
	if err != nil || len(dropped) != 1 || dropped[0] != "other" {
		t.Errorf("Prune = %v, %v; want [other]", dropped, err)
	}
	if again, _ := OpenIssued(state); len(again.Tokens("other")) != 0 {
		t.Errorf("after Prune the file still holds tokens of other: %v", again.Tokens("other"))
	}
}

// TestIssuedFileCorrupt: a store that cannot be parsed is an error naming
// the file, not an empty store.
func TestIssuedFileCorrupt(t *testing.T) {
	state := t.TempDir()
	writeFile(t, state, IssuedFile, `{"clients": {"ci": [{"id": "x", "sha256": "not-hex"}]}}`)
	if _, err := OpenIssued(state); err == nil || !strings.Contains(err.Error(), filepath.Join(state, IssuedFile)) {
		t.Errorf("OpenIssued of a corrupt file = %v, want an error naming it", err)
	}
}
