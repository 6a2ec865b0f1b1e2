package access

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "github__create_issue", true},
		{"github__*", "github__create_issue", true},
		{"github__*", "gitlab__create_issue", false},
		{"*delete*", "fs__delete_file", true},
		{"*delete*", "fs__read_file", false},
		{"fs__read_?ile", "fs__read_file", true},
		{"fs__read_?ile", "fs__read_ffile", false},
		{"file:///pub/*", "file:///pub/a/b.txt", true},
		{"file:///pub/*", "file:///private/x", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"é?", "éü", true},
		{"**", "anything", true},
	}
	for _, tc := range tests {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestPolicyLastMatchWins(t *testing.T) {
	p := NewPolicy([]string{"*", "!*delete*", "fs__delete_tmp"}, []string{"file:///pub/*"}, nil)
	tests := []struct {
		kind Kind
		name string
		want bool
	}{
		{Tools, "fs__read", true},
		{Tools, "fs__delete_file", false},
		{Tools, "fs__delete_tmp", true},
		{Resources, "file:///pub/x", true},
		{Resources, "file:///etc/passwd", false},
		{Prompts, "anything", false}, // no pattern: hidden
	}
	for _, tc := range tests {
		if got := p.Allows(tc.kind, tc.name); got != tc.want {
			t.Errorf("Allows(%v, %q) = %v, want %v", tc.kind, tc.name, got, tc.want)
		}
	}
	if p.Unrestricted() || !AllowAll().Unrestricted() || !NewPolicy([]string{"*"}, []string{"*"}, []string{"*"}).Unrestricted() {
		t.Error("Unrestricted is wrong")
	}
}

func TestBucket(t *testing.T) {
	b := NewBucket(2, time.Minute)
	now := time.Unix(1000, 0)
	for i := range 2 {
		if ok, _ := b.Take(now); !ok {
			t.Fatalf("take %d refused within the burst", i+1)
		}
	}
	ok, wait := b.Take(now)
	if ok || wait < 29*time.Second || wait > 31*time.Second {
		t.Errorf("third take = %v, retry after %v; want refused, about 30s", ok, wait)
	}
	if ok, _ := b.Take(now.Add(30 * time.Second)); !ok {
		t.Error("a token did not come back after interval/burst")
	}
}

// TestIdentify covers the identities a request can present, by data.
func TestIdentify(t *testing.T) {
	dir := t.TempDir()
	path := testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml": `[clients.hashed]
token_sha256 = "` + sha("hashed-token") + `"
[clients.cred]
token_credential = "tok"
[clients.rootish]
unix_users = ["0"]
[clients.group]
unix_groups = ["4242"]
[clients.ghost]
token_credential = "missing"
`,
	})
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tok", "credential-token\n")
	set, warnings := NewSet(cfg, Options{CredentialsDirectory: dir})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "${credential:missing}") {
		t.Errorf("warnings %q, want one for the missing credential", warnings)
	}
	hashed, cred := TokenIdentity(mustHex(t, sha("hashed-token"))), TokenIdentity(mustHex(t, sha("credential-token")))
	tests := []struct {
		name       string
		auth       string
		peer       Peer
		want       string
		identity   string
		wantStatus int
	}{
		{"hashed token", "Bearer hashed-token", Peer{Addr: "127.0.0.1:1"}, "hashed", hashed, 0},
		{"token from a credential", "Bearer credential-token", Peer{Addr: "127.0.0.1:1"}, "cred", cred, 0},
		{"scheme is case-insensitive", "bearer hashed-token", Peer{Addr: "127.0.0.1:1"}, "hashed", hashed, 0},
		{"wrong token", "Bearer nope", Peer{Addr: "127.0.0.1:1"}, "", "", 401},
		{"basic auth", "Basic eDp5", Peer{Addr: "127.0.0.1:1"}, "", "", 401},
		{"no token over TCP", "", Peer{Addr: "127.0.0.1:1"}, "", "", 401},
		{"uid listed", "", Peer{Cred: &unix.Ucred{Uid: 0, Gid: 0}}, "rootish", "uid:0", 0},
		{"primary group listed", "", Peer{Cred: &unix.Ucred{Uid: 5000, Gid: 4242}}, "group", "uid:5000", 0},
		{"supplementary group listed", "", Peer{Cred: &unix.Ucred{Uid: 5001, Gid: 5000}, Groups: []uint32{27, 4242}}, "group", "uid:5001", 0},
		{"peer no client lists", "", Peer{Cred: &unix.Ucred{Uid: 5000, Gid: 5000, Pid: 1 << 30}}, "", "", 403},
		{"token beats peer credentials", "Bearer nope", Peer{Cred: &unix.Ucred{Uid: 0}}, "", "", 401},
		{"a token's identity, not the peer's", "Bearer hashed-token", Peer{Cred: &unix.Ucred{Uid: 0}}, "hashed", hashed, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "http://localhost/mcp", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			c, refusal := set.Identify(r, tc.peer)
			switch {
			case tc.wantStatus != 0 && (refusal == nil || refusal.Status != tc.wantStatus):
				t.Errorf("got %v %v, want refusal %d", c, refusal, tc.wantStatus)
			case tc.wantStatus == 0 && (refusal != nil || c.Client.Name != tc.want || c.Identity != tc.identity):
				t.Errorf("got %v %v, want client %s as %s", c, refusal, tc.want, tc.identity)
			}
			if refusal != nil && strings.Contains(refusal.Reason+refusal.Advice, "nope") {
				t.Errorf("the refusal repeats the token: %+v", refusal)
			}
		})
	}
}

func TestAuthNone(t *testing.T) {
	cfg := config.Default()
	cfg.Gateway.Auth = "none"
	set, _ := NewSet(cfg, Options{})
	r, _ := http.NewRequest(http.MethodPost, "http://localhost/mcp", nil)
	c, refusal := set.Identify(r, Peer{Addr: "127.0.0.1:1"})
	if refusal != nil || c.Client.Name != "anonymous" || !c.Client.Policy.Unrestricted() || c.Identity != "" {
		t.Errorf("auth none: %v %v, want anonymous without restrictions", c, refusal)
	}
}

func TestRefusalsLimitLogAndSlowDown(t *testing.T) {
	rec := &testutil.LogRecorder{}
	r := NewRefusals(slog.New(rec))
	peer := Peer{Addr: "192.0.2.1:4000"}
	var delays []time.Duration
	for range 8 {
		delays = append(delays, r.Refused(peer, &Refusal{Status: 401, Reason: "no bearer token"}, "POST", "/mcp"))
	}
	if n := len(rec.Messages()); n != refusalsLogged {
		t.Errorf("%d entries for 8 refusals, want %d", n, refusalsLogged)
	}
	for i, d := range delays {
		if i < refusalsFree && d != 0 || i >= refusalsFree && d == 0 || i > refusalsFree && d <= delays[i-1] && d < maxDelay {
			t.Errorf("delays %v: want none for the first %d, then growing", delays, refusalsFree)
			break
		}
	}
	// Another peer is not slowed down by the first one's failures.
	if d := r.Refused(Peer{Addr: "192.0.2.2:4000"}, &Refusal{Status: 401}, "POST", "/mcp"); d != 0 {
		t.Errorf("another peer delayed %v", d)
	}
}

// TestConnContext reads the peer credentials of a real unix socket
// connection, and the address of a TCP one.
func TestConnContext(t *testing.T) {
	path := filepath.Join(testutil.ShortTempDir(t), "s")
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = path
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			client, err := net.Dial(network, l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			p := PeerFrom(ConnContext(context.Background(), server))
			switch network {
			case "unix":
				if p.Cred == nil || int(p.Cred.Uid) != os.Getuid() || int(p.Cred.Pid) != os.Getpid() || p.Groups == nil && len(mustGroups(t)) > 0 {
					t.Errorf("peer %+v (groups %v), want this process's uid %d and pid %d", p, p.Groups, os.Getuid(), os.Getpid())
				}
			case "tcp":
				if p.Cred != nil || p.Addr != client.LocalAddr().String() {
					t.Errorf("peer %+v, want address %s and no credentials", p, client.LocalAddr())
				}
			}
		})
	}
}

func mustGroups(t *testing.T) []int {
	g, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRateLimitSurvivesReload(t *testing.T) {
	cfg := config.Default()
	cfg.Clients["ci"] = &config.Client{Name: "ci", TokenSHA256: sha("t"), RateLimit: config.RateLimit{Burst: 1, Interval: time.Hour}}
	first, _ := NewSet(cfg, Options{})
	if ok, _ := first.Client("ci").Limit.Take(time.Now()); !ok {
		t.Fatal("first request refused")
	}
	second, _ := NewSet(cfg, Options{Previous: first})
	if ok, _ := second.Client("ci").Limit.Take(time.Now()); ok {
		t.Error("a reload refilled the client's bucket")
	}
	cfg.Clients["ci"].RateLimit.Burst = 2
	third, _ := NewSet(cfg, Options{Previous: second})
	if ok, _ := third.Client("ci").Limit.Take(time.Now()); !ok {
		t.Error("a changed rate_limit kept the old bucket")
	}
}

// BenchmarkIdentify measures identifying a request by token among 20
// clients, the work added to every HTTP request.
func BenchmarkIdentify(b *testing.B) {
	cfg := config.Default()
	for i := range 20 {
		name := "c" + strconv.Itoa(i)
		cfg.Clients[name] = &config.Client{Name: name, TokenSHA256: sha("token-" + name)}
	}
	set, _ := NewSet(cfg, Options{})
	r, _ := http.NewRequest(http.MethodPost, "http://localhost/mcp", nil)
	r.Header.Set("Authorization", "Bearer token-c19")
	b.ReportAllocs()
	for b.Loop() {
		if c, _ := set.Identify(r, Peer{Addr: "127.0.0.1:1"}); c.Client == nil {
			b.Fatal("not identified")
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResourcePatternsJudgeNormalURIs: a resource pattern matches a URI as
// written, and a backend reads it resolved; a URI with dot segments,
// empty segments or encoded dots and slashes is hidden from a client with
// resource patterns (and the rule says why), never matched. Before,
// file:///srv/docs/../secret passed file:///srv/docs/*, and
// file:///srv/docs//private/x escaped !file:///srv/docs/private/*.
func TestResourcePatternsJudgeNormalURIs(t *testing.T) {
	p := NewPolicy(nil, []string{"file:///srv/docs/*", "!file:///srv/docs/private/*"}, nil)
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"file:///srv/docs/a.md", true},
		{"file:///srv/docs/sub/b.md?x=..#..", true},
		{"file:///srv/docs/private/x", false},
		{"file:///srv/docs/../secret", false},
		{"file:///srv/docs/./private/x", false},
		{"file:///srv/docs//private/x", false},
		{"file:///srv/docs/%2e%2e/secret", false},
		{"file:///srv/docs/%2E%2e/secret", false},
		{"file:///srv/docs/x%2fy", false},
		{"file:///srv/docs/..\\secret", false},
		{"file:///srv/docs/%5c../secret", false},
	} {
		if got := p.Allows(Resources, tc.uri); got != tc.want {
			t.Errorf("Allows(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
	if r := p.Rule(Resources, "file:///srv/docs/../secret"); !strings.Contains(r, "normal form") {
		t.Errorf("the rule of a URI not in normal form: %q", r)
	}
	if all := NewPolicy([]string{"x"}, []string{"*"}, nil); !all.Allows(Resources, "file:///srv/docs/../secret") {
		t.Error("a policy that shows every resource hides a URI not in normal form")
	}
	if !NormalURI("note://host") || !NormalURI("urn:isbn:0451450523") || !NormalURI("mcpgate://backend/a") {
		t.Error("URIs in normal form are taken for others")
	}
}
