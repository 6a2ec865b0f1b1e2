package ctl

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// bridgeTokenEnv names the variable the bridge takes its token from.
const bridgeTokenEnv = "MCPGATE_TOKEN"

// bridgeToken returns the bearer token the bridge sends: the content of
// file, else $MCPGATE_TOKEN, else none.
func bridgeToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(bridgeTokenEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--token-file %s is empty; it should hold the token `mcpgatectl token create` printed", file)
	}
	return token, nil
}

// tokenDropIn is the drop-in file `token create NAME` writes.
func tokenDropIn(configPath, name string) string {
	return filepath.Join(filepath.Dir(configPath), config.DropInDir, "client-"+name+".toml")
}

var tokenClientName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// token runs "token create|list|revoke|add"; add, and revoke with a
// token id, go through the running gateway (clients.go).
func (c *cli) token(args []string) int {
	if len(args) == 0 {
		return c.usageError(errors.New("token takes create NAME, list, revoke NAME, add NAME or revoke NAME ID"))
	}
	sub, args := args[0], args[1:]
	fs := c.flagSet("mcpgatectl token " + sub)
	cfgPath := fs.String("config", config.DefaultPath, "")
	var tools, resources, prompts stringList
	fs.Var(&tools, "tools", "")
	fs.Var(&resources, "resources", "")
	fs.Var(&prompts, "prompts", "")
	printOnly := fs.Bool("print", false, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return c.usageError(err)
	}
	switch {
	case sub == "create" && len(pos) == 1:
		return c.tokenCreate(*cfgPath, pos[0], policy{tools, resources, prompts}, *printOnly)
	case sub == "list" && len(pos) == 0:
		return c.tokenList(*cfgPath)
	case sub == "revoke" && len(pos) == 1:
		return c.tokenRevoke(*cfgPath, pos[0])
	case sub == "add" && len(pos) == 1:
		return c.tokenAdd(pos[0])
	case sub == "revoke" && len(pos) == 2:
		return c.tokenRevokeIssued(pos[0], pos[1])
	}
	return c.usageError(fmt.Errorf("token takes create NAME [--tools GLOB ...] [--resources GLOB ...] [--prompts GLOB ...] [--print], list, revoke NAME, add NAME, or revoke NAME ID"))
}

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// policy is what token create restricts: each list, when given, becomes the
// client's key of that name; a list not given stays "*", everything.
type policy struct{ tools, resources, prompts []string }

// tokenCreate makes a random 256-bit token, prints it once and writes the
// drop-in with its hash (or prints it with --print).
func (c *cli) tokenCreate(cfgPath, name string, pol policy, printOnly bool) int {
	if !tokenClientName.MatchString(name) || name == config.AnonymousClient {
		return c.usageError(fmt.Errorf("invalid client name %q; use 1 to 64 letters, digits, \"_\" or \"-\" (not %q)", name, config.AnonymousClient))
	}
	if cfg, err := config.Load(cfgPath); err == nil {
		if cl, ok := cfg.Clients[name]; ok {
			fmt.Fprintf(c.stderr, "mcpgatectl: client %q already exists (%s:%d); revoke it first, or choose another name\n", name, cl.File, cl.Line)
			return exitFailed
		}
		for _, u := range c.unmatched(cfg, name, pol) {
			fmt.Fprintln(c.stderr, "warning: "+u.String())
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		fmt.Fprintf(c.stderr, "mcpgatectl: %v\n", err)
		return exitFailed
	}
	token := "mcpgate_" + hex.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	var b strings.Builder
	fmt.Fprintf(&b, "# Client %q, made by mcpgatectl token create. The token itself is not\n# stored anywhere; `mcpgatectl token revoke %s` removes this file.\n", name, name)
	fmt.Fprintf(&b, "[clients.%s]\ntoken_sha256 = %q\n", name, hex.EncodeToString(sum[:]))
	for _, key := range []struct {
		name     string
		patterns []string
	}{{"tools", pol.tools}, {"resources", pol.resources}, {"prompts", pol.prompts}} {
		if len(key.patterns) == 0 {
			continue
		}
		quoted := make([]string, len(key.patterns))
		for i, t := range key.patterns {
			quoted[i] = strconv.Quote(t)
		}
		fmt.Fprintf(&b, "%s = [%s]\n", key.name, strings.Join(quoted, ", "))
	}
	if printOnly {
		fmt.Fprint(c.stdout, b.String())
		fmt.Fprintf(c.stderr, "token (shown once; give it to the client as Authorization: Bearer TOKEN): %s\n", token)
		return exitOK
	}
	path := tokenDropIn(cfgPath, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintf(c.stderr, "mcpgatectl: %v\n", err)
		return exitFailed
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = f.WriteString(b.String())
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "mcpgatectl: writing %s: %v\n", path, err)
		return exitFailed
	}
	fmt.Fprintln(c.stdout, token)
	fmt.Fprintf(c.stderr, "wrote %s; the token above is shown only once. Apply it with: mcpgatectl reload\n", path)
	return exitOK
}

// unmatched returns the patterns of pol that match nothing: tools against
// the running gateway's tools, when it answers on the bus, else against
// the backends' prefixes, as --check-config does; prompts against the
// prefixes. Resource patterns are checked at reload, against the catalog.
func (c *cli) unmatched(cfg *config.Config, name string, pol policy) []access.Unmatched {
	orAll := func(l []string) []string {
		if len(l) == 0 {
			return []string{"*"}
		}
		return l
	}
	client := &config.Client{Name: name, Tools: orAll(pol.tools), Resources: []string{"*"}, Prompts: orAll(pol.prompts)}
	static := *cfg
	static.Clients = map[string]*config.Client{name: client}
	out := access.UnmatchedPrefixes(&static)
	tools, ok := c.liveTools()
	if !ok {
		return out
	}
	live := slices.DeleteFunc(out, func(u access.Unmatched) bool { return u.Kind == access.Tools })
	toolsOnly := &config.Client{Name: name, Tools: client.Tools, Resources: []string{"*"}, Prompts: []string{"*"}}
	return append(access.UnmatchedPatterns(map[string]*config.Client{name: toolsOnly}, access.Names{access.Tools: tools}), live...)
}

// liveTools returns the names of the running gateway's tools, if it
// answers on the bus; a gateway that is not running is no error here.
func (c *cli) liveTools() ([]string, bool) {
	client, err := dbusapi.Dial(c.opts.user)
	if err != nil {
		return nil, false
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	tools, err := client.ListTools(ctx)
	if err != nil {
		return nil, false
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names, true
}

// tokenList prints each configured client and how it is recognised.
func (c *cli) tokenList(cfgPath string) int {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		fmt.Fprintln(c.stderr, err)
		return exitFailed
	}
	names := make([]string, 0, len(cfg.Clients))
	for n := range cfg.Clients {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		cl := cfg.Clients[n]
		var how []string
		switch {
		case cl.TokenSHA256 != "":
			how = append(how, "token sha256:"+cl.TokenSHA256[:12]+"…")
		case cl.TokenCredential != "":
			how = append(how, "token from credential "+cl.TokenCredential)
		}
		if len(cl.UnixUsers) > 0 {
			how = append(how, "unix users "+strings.Join(cl.UnixUsers, ","))
		}
		if len(cl.UnixGroups) > 0 {
			how = append(how, "unix groups "+strings.Join(cl.UnixGroups, ","))
		}
		uses := "tools " + strings.Join(cl.Tools, ",")
		if !slices.Equal(cl.Resources, []string{"*"}) {
			uses += "; resources " + strings.Join(cl.Resources, ",")
		}
		if !slices.Equal(cl.Prompts, []string{"*"}) {
			uses += "; prompts " + strings.Join(cl.Prompts, ",")
		}
		fmt.Fprintf(c.stdout, "%s\t%s\t%s\t%s:%d\n", n, strings.Join(how, "; "), uses, cl.File, cl.Line)
	}
	return exitOK
}

// tokenRevoke removes the drop-in token create wrote.
func (c *cli) tokenRevoke(cfgPath, name string) int {
	if !tokenClientName.MatchString(name) {
		return c.usageError(fmt.Errorf("invalid client name %q", name))
	}
	path := tokenDropIn(cfgPath, name)
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(c.stderr, "mcpgatectl: %s does not exist: client %q was not made by `mcpgatectl token create`; remove its [clients.%s] table by hand\n", path, name, name)
		} else {
			fmt.Fprintf(c.stderr, "mcpgatectl: %v\n", err)
		}
		return exitFailed
	}
	fmt.Fprintf(c.stderr, "removed %s. Apply it with: mcpgatectl reload (the client's sessions end then)\n", path)
	return exitOK
}

var _ flag.Value = (*stringList)(nil)
