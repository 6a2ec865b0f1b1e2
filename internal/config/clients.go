package config

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Access holds the [gateway] keys that decide who may reach the gateway at
// all; it is embedded in Gateway.
type Access struct {
	Auth                 string // "required" (default) | "none"
	Audit                string // "calls" (default) | "off"
	CredentialsDirectory string // where ${credential:NAME} is read when $CREDENTIALS_DIRECTORY is unset
}

// Client holds one [clients.NAME] table: an identity that may call the
// gateway, and what it may use.
type Client struct {
	Name            string
	File            string // where [clients.NAME] was defined
	Line            int
	TokenSHA256     string    // lower-case hex SHA-256 of the bearer token
	TokenCredential string    // credential holding the bearer token itself
	UnixUsers       []string  // user names or numeric uids, checked with SO_PEERCRED
	UnixGroups      []string  // group names or numeric gids
	Tools           []string  // globs over exposed tool names, "!" excludes, last match wins
	Resources       []string  // globs over resource URIs (and URI templates)
	Prompts         []string  // globs over exposed prompt names
	MaxSessions     int       // 0: no limit of its own
	RateLimit       RateLimit // requests per interval; zero: unlimited
	// Profile is the [profiles.NAME] the client sees at the endpoint's own
	// path; "" (default) for the whole catalog its policy allows.
	Profile string
	// Search serves the client in search mode wherever it connects.
	Search        bool
	OAuthIdentity // oauth_*: how access tokens name it; see oauth.go
}

// AnonymousClient is the name every caller has when [gateway] auth is
// "none".
const AnonymousClient = "anonymous"

var clientName = boundedName{regexp.MustCompile(`^[A-Za-z0-9_-]+$`), 64}

func defaultAccess() Access {
	return Access{Auth: "required", Audit: "calls"}
}

func defaultClient(name string) *Client {
	return &Client{Name: name, Tools: []string{"*"}, Resources: []string{"*"}, Prompts: []string{"*"}}
}

// accessFields are the [gateway] keys of Access.
func accessFields() []field[Gateway] {
	return []field[Gateway]{
		{"auth", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.Auth, oneOf("required", "none"))
		}},
		{"audit", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.Audit, oneOf("calls", "off"))
		}},
		{"credentials_directory", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.CredentialsDirectory, checkAbsolute)
		}},
	}
}

func clientFields() []field[Client] {
	return append([]field[Client]{
		{"token_sha256", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.str(at, v, &c.TokenSHA256, checkSHA256)
		}},
		{"token_credential", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.str(at, v, &c.TokenCredential, checkCredentialName)
		}},
		{"unix_users", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.UnixUsers, checkNotEmpty)
		}},
		{"unix_groups", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.UnixGroups, checkNotEmpty)
		}},
		{"tools", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.Tools, checkGlob)
		}},
		{"resources", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.Resources, checkGlob)
		}},
		{"prompts", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.Prompts, checkGlob)
		}},
		{"max_sessions", func(d *decoder, at keyPath, v any, c *Client) bool {
			return integer(d, at, v, &c.MaxSessions, 1, math.MaxInt32)
		}},
		{"rate_limit", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.rateLimit(at, v, &c.RateLimit)
		}},
		{"profile", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.str(at, v, &c.Profile, checkProfileName)
		}},
		{"search", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.boolean(at, v, &c.Search)
		}},
	}, oauthIdentityFields()...)
}

// client decodes the table v of clients.NAME; it returns nil if v is not a
// table.
func (d *decoder) client(at keyPath, v any) *Client {
	t, ok := d.table(at, v, "a table", "write a [clients.NAME] header with the client's keys below it")
	if !ok {
		return nil
	}
	name := at[len(at)-1]
	c := defaultClient(name)
	c.File = d.f.path
	c.Line = d.f.lookup(at).line
	switch {
	case !clientName.MatchString(name):
		d.fail(at, `invalid client name %q; use 1 to 64 letters, digits, "_" or "-"`, name)
	case name == AnonymousClient:
		d.fail(at, `the client name %q is reserved for every caller when [gateway] auth = "none"; choose another name`, name)
	}
	refused := decodeTable(d, at, t, clientFields(), c)
	_, hash := t["token_sha256"]
	_, cred := t["token_credential"]
	_, users := t["unix_users"]
	_, groups := t["unix_groups"]
	_, subjects := t["oauth_subjects"]
	_, oauthGroups := t["oauth_groups"]
	switch {
	case hash && cred:
		d.fail(at.child("token_credential"), "set token_sha256 or token_credential, not both; a client has one token")
	case !hash && !cred && !users && !groups && !subjects && !oauthGroups && len(refused) == 0:
		d.fail(at, "the client has no identity: set token_sha256 (`mcpgatectl token create` makes one), token_credential, unix_users, unix_groups, oauth_subjects or oauth_groups")
	}
	return c
}

// clientsTable decodes [clients.*] of one file into cfg, reporting a
// client defined in two files.
func (d *decoder) clients(t map[string]any, cfg *Config) {
	for _, name := range slices.Sorted(maps.Keys(t)) {
		at := keyPath{"clients", name}
		if prev, ok := cfg.Clients[name]; ok {
			here := d.f.lookup(at)
			d.fail(at, "client defined twice: first at %s:%d, again at %s:%d; keep one definition",
				prev.File, prev.Line, d.f.path, here.line)
			continue
		}
		if c := d.client(at, t[name]); c != nil {
			cfg.Clients[name] = c
		}
	}
}

// Equal reports whether c and o configure the same client, ignoring File
// and Line.
func (c *Client) Equal(o *Client) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Name == o.Name && c.TokenSHA256 == o.TokenSHA256 && c.TokenCredential == o.TokenCredential &&
		slices.Equal(c.UnixUsers, o.UnixUsers) && slices.Equal(c.UnixGroups, o.UnixGroups) &&
		slices.Equal(c.Tools, o.Tools) && slices.Equal(c.Resources, o.Resources) && slices.Equal(c.Prompts, o.Prompts) &&
		c.MaxSessions == o.MaxSessions && c.RateLimit == o.RateLimit && c.Profile == o.Profile && c.Search == o.Search &&
		c.oauthIdentityEqual(&o.OAuthIdentity)
}

// CredentialRefs returns the NAMEs of the ${credential:NAME} placeholders
// in s, in order.
func CredentialRefs(s string) []string {
	var names []string
	for _, m := range credentialRef.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// credentialRef is a ${credential:NAME} placeholder.
var credentialRef = CredentialPlaceholder()

// CredentialPlaceholder returns a regexp matching ${credential:NAME}, with
// NAME as its first group.
func CredentialPlaceholder() *regexp.Regexp { return regexp.MustCompile(`\$\{credential:([^}]*)\}`) }

// credentialName is what systemd accepts as a credential name, as a file
// name in $CREDENTIALS_DIRECTORY.
var credentialName = boundedName{regexp.MustCompile(`^[A-Za-z0-9_.@-]+$`), 255}

func checkCredentialName(s string) string {
	if !credentialName.MatchString(s) || s == "." || s == ".." {
		return fmt.Sprintf(`%q is not a valid credential name; use letters, digits, "_", "-", "." and "@", as in LoadCredential=`, s)
	}
	return ""
}

// checkCredentialRefs accepts a string whose ${credential:NAME}
// placeholders all name valid credentials.
func checkCredentialRefs(s string) string {
	for _, name := range CredentialRefs(s) {
		if msg := checkCredentialName(name); msg != "" {
			return "in ${credential:" + name + "}: " + msg
		}
	}
	return ""
}

func checkSHA256(s string) string {
	if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
		return "not a SHA-256 in hex (64 hex digits); `mcpgatectl token create NAME` makes a token and its hash, or `printf %s TOKEN | sha256sum` computes one"
	}
	if strings.ToLower(s) != s {
		return "write the hash in lower case"
	}
	return ""
}

func checkGlob(s string) string {
	if strings.TrimPrefix(s, "!") == "" {
		return `empty pattern; write a name or a glob such as "github__*" or "!*delete*"`
	}
	return ""
}

func checkAbsolute(s string) string {
	if s != "" && !strings.HasPrefix(s, "/") {
		return fmt.Sprintf("%q is not an absolute path; write one such as \"/etc/mcpgate/credentials\"", s)
	}
	return ""
}

// CredentialsInArgs returns a warning for each backend whose args hold a
// ${credential:NAME} placeholder: every local user can read a process's
// arguments in /proc, so credentials belong in env.
func (c *Config) CredentialsInArgs() []string {
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(c.Backends)) {
		b := c.Backends[name]
		for _, a := range b.Args {
			if refs := CredentialRefs(a); len(refs) > 0 {
				warnings = append(warnings, fmt.Sprintf("%s:%d: backend %q passes credential %q in args, which every local user can read in /proc/PID/cmdline; pass it in env instead",
					b.File, b.Line, name, refs[0]))
				break
			}
		}
	}
	return warnings
}

func checkInheritEnv(s string) string {
	switch {
	case !envName.MatchString(s):
		return fmt.Sprintf(`%q is not a valid environment variable name; use letters, digits and "_", not starting with a digit`, s)
	case slices.Contains(ReservedEnv(), s):
		return fmt.Sprintf("%s is reserved: it describes mcpgated's own sockets and is never passed to backends; remove it", s)
	}
	return ""
}
