package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

const testHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestClients(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml": "[gateway]\nauth = \"none\"\naudit = \"off\"\ncredentials_directory = \"/etc/mcpgate/credentials\"\n" +
			"[clients.local]\nunix_users = [\"root\"]\nunix_groups = [\"mcpgate\"]\n",
		"conf.d/client-ci.toml": "[clients.ci]\ntoken_sha256 = \"" + testHash + "\"\ntools = [\"*\", \"!*delete*\"]\nmax_sessions = 2\nrate_limit = \"100/1m\"\n",
	})
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Gateway.Access; got != (Access{Auth: "none", Audit: "off", CredentialsDirectory: "/etc/mcpgate/credentials"}) {
		t.Errorf("Access = %+v", got)
	}
	local, ci := cfg.Clients["local"], cfg.Clients["ci"]
	if local == nil || ci == nil {
		t.Fatalf("clients %v", cfg.Clients)
	}
	if !reflect.DeepEqual(local.Tools, []string{"*"}) || !reflect.DeepEqual(local.UnixGroups, []string{"mcpgate"}) || local.Line != 5 {
		t.Errorf("local = %+v", local)
	}
	want := &Client{Name: "ci", TokenSHA256: testHash, Tools: []string{"*", "!*delete*"}, Resources: []string{"*"}, Prompts: []string{"*"},
		MaxSessions: 2, RateLimit: RateLimit{Burst: 100, Interval: time.Minute}}
	if !ci.Equal(want) || !strings.HasSuffix(ci.File, "client-ci.toml") {
		t.Errorf("ci = %+v, want %+v", ci, want)
	}
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name, toml string
		want       []string
	}{
		{"no identity", "[clients.x]\ntools = [\"*\"]\n", []string{
			"mcpgate.toml:1:10: clients.x: the client has no identity: set token_sha256 (`mcpgatectl token create` makes one), token_credential, unix_users, unix_groups, oauth_subjects or oauth_groups"}},
		{"two tokens", "[clients.x]\ntoken_sha256 = \"" + testHash + "\"\ntoken_credential = \"tok\"\n", []string{
			"mcpgate.toml:3:1: clients.x.token_credential: set token_sha256 or token_credential, not both; a client has one token"}},
		{"not a hash", "[clients.x]\ntoken_sha256 = \"secret\"\n", []string{
			"mcpgate.toml:2:1: clients.x.token_sha256: not a SHA-256 in hex (64 hex digits); `mcpgatectl token create NAME` makes a token and its hash, or `printf %s TOKEN | sha256sum` computes one"}},
		{"reserved name", "[clients.anonymous]\nunix_users = [\"root\"]\n", []string{
			`mcpgate.toml:1:10: clients.anonymous: the client name "anonymous" is reserved for every caller when [gateway] auth = "none"; choose another name`}},
		{"unknown key", "[clients.x]\nunix_user = [\"root\"]\n", []string{
			`mcpgate.toml:2:1: clients.x.unix_user: unknown key (did you mean "unix_users"?)`}},
		{"empty pattern", "[clients.x]\nunix_users = [\"root\"]\ntools = [\"!\"]\n", []string{
			`mcpgate.toml:3:10: clients.x.tools: empty pattern; write a name or a glob such as "github__*" or "!*delete*"`}},
		{"bad auth", "[gateway]\nauth = \"optional\"\n", []string{
			`mcpgate.toml:2:1: gateway.auth: "optional" is not a valid value; use one of "required", "none"`}},
		{"bad credential name", "[backends.gh]\ncommand = \"gh\"\nenv = { T = \"${credential:a/b}\" }\n", []string{
			`mcpgate.toml:3:9: backends.gh.env.T: in ${credential:a/b}: "a/b" is not a valid credential name; use letters, digits, "_", "-", "." and "@", as in LoadCredential=`}},
		{"inherit reserved", "[backends.gh]\ncommand = \"gh\"\ninherit_env = [\"NOTIFY_SOCKET\"]\n", []string{
			`mcpgate.toml:3:16: backends.gh.inherit_env: NOTIFY_SOCKET is reserved: it describes mcpgated's own sockets and is never passed to backends; remove it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorLines(t, testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tt.toml}))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestCredentialsInArgs(t *testing.T) {
	cfg, err := Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[backends.gh]\ncommand = \"gh\"\nargs = [\"--token\", \"${credential:gh}\"]\n[backends.ok]\ncommand = \"x\"\nenv = { T = \"${credential:gh}\" }\n"}))
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.CredentialsInArgs()
	if len(w) != 1 || !strings.Contains(w[0], `backend "gh" passes credential "gh" in args`) || !strings.Contains(w[0], "mcpgate.toml:1") {
		t.Errorf("warnings %q, want one for gh", w)
	}
}
