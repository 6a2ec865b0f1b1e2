// Package man_test checks that the manual pages document every public
// name: configuration keys, mcpgatectl commands, D-Bus members, journal
// fields and MESSAGE_IDs, each derived from the code that defines it.
package man_test

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/ctl"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	dbusfiles "github.com/mcpgate/mcpgate/packaging/dbus"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// page is one scdoc source split into its sections.
type page struct {
	name     string
	text     string
	sections map[string][]string // "# HEADING" → its lines
}

func readPage(t *testing.T, name string) page {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	p := page{name: name, text: string(b), sections: map[string][]string{}}
	heading := ""
	code := false // in a ``` block, where "# " is a comment
	for _, line := range strings.Split(p.text, "\n") {
		if strings.TrimSpace(line) == "```" {
			code = !code
		}
		if h, ok := strings.CutPrefix(line, "# "); ok && !code {
			heading = h
			continue
		}
		p.sections[heading] = append(p.sections[heading], line)
	}
	return p
}

// entry is a definition list item: its term line and indented body.
type entry struct {
	term string
	body []string
}

// entries returns the definition items of a section, by the first bold
// word of their term ("*listen* (array of strings)" → "listen").
func entries(lines []string) map[string]entry {
	bold := regexp.MustCompile(`^\*([^*]+)\*`)
	out := map[string]entry{}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" || line[0] == '\t' || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "\t") {
			continue
		}
		m := bold.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		e := entry{term: line}
		for i+1 < len(lines) && (lines[i+1] == "" || lines[i+1][0] == '\t') {
			i++
			e.body = append(e.body, strings.TrimPrefix(lines[i], "\t"))
		}
		out[m[1]] = e
	}
	return out
}

// unescape removes scdoc's escapes and markup: \_ → _, *bold* and
// _underline_ markers are left alone (values do not use them).
func unescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\_`, "_"), `\*`, "*")
}

// field returns the text after "LABEL: " in an entry's body.
func (e entry) field(label string) (string, bool) {
	for _, l := range e.body {
		if v, ok := strings.CutPrefix(l, label+": "); ok {
			return unescape(v), true
		}
	}
	return "", false
}

// TestConfigKeys checks that mcpgate.toml(5) documents every key with its
// type, a default that is the real one, and an example that is valid.
func TestConfigKeys(t *testing.T) {
	p := readPage(t, "mcpgate.toml.5.scd")
	tables := map[string]map[string]entry{
		"gateway":    entries(p.sections["[gateway] SECTION"]),
		"backends":   entries(p.sections["[backends.NAME] SECTION"]),
		"clients":    entries(p.sections["[clients.NAME] SECTION"]),
		"composites": entries(p.sections["[composites.NAME] SECTION"]),
		"profiles":   entries(p.sections["[profiles.NAME] SECTION"]),
		"oauth":      entries(p.sections["[oauth] SECTION"]),
		"telemetry":  entries(p.sections["[telemetry] SECTION"]),
	}
	adapter, err := os.ReadFile("../examples/adapters/jq.toml")
	if err != nil {
		t.Fatal(err)
	}
	// load loads a main file with the example adapter file beside it.
	load := func(t *testing.T, main string) (*config.Config, error) {
		return config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": main, "adapters/jq.toml": string(adapter)}))
	}
	for _, key := range config.Keys() {
		t.Run(key, func(t *testing.T) {
			table, _, _ := strings.Cut(key, ".")
			name := key[strings.LastIndex(key, ".")+1:]
			backendBase := "[backends.x]\ncommand = \"/bin/true\"\n"
			if slices.Contains(config.RemoteKeys(), name) {
				backendBase = "[backends.x]\nurl = \"https://mcp.example.com/mcp\"\n"
			}
			if name == "command" || name == "url" {
				backendBase = "[backends.x]\n"
			}
			if strings.HasPrefix(name, "oauth_") { // a remote backend's own token
				backendBase = remoteOAuthBase(name)
			}
			if name == "fallback" { // the example's fallback must exist
				backendBase = "[backends.github-mirror]\ncommand = \"/bin/true\"\n" + backendBase
			}
			e, ok := tables[table][name]
			if !ok {
				t.Fatalf("%s: no entry *%s* (TYPE) in its section", p.name, name)
			}
			if !regexp.MustCompile(`^\*` + name + `\* \(.+\)$`).MatchString(e.term) {
				t.Errorf("term %q: want *%s* (TYPE)", e.term, name)
			}
			def, ok := e.field("Default")
			if !ok {
				t.Errorf("no \"Default:\" line")
			}
			example, ok := e.field("Example")
			if !ok {
				t.Fatalf("no \"Example:\" line")
			}
			if !strings.HasPrefix(example, name+" = ") {
				t.Errorf("example %q does not set %s", example, name)
			}

			// The example is valid, and the documented default is the
			// one a file without the key gets.
			switch table {
			case "gateway":
				if _, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[gateway]\n" + example + "\n"})); err != nil {
					t.Errorf("example %q: %v", example, err)
				}
				cfg, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[gateway]\n" + name + " = " + def + "\n"}))
				if err != nil {
					t.Fatalf("default %q is not a valid value: %v", def, err)
				}
				if !reflect.DeepEqual(emptyIsNil(cfg.Gateway), emptyIsNil(config.Default().Gateway)) {
					t.Errorf("documented default %q is not the real default:\n got %+v\nwant %+v", def, cfg.Gateway, config.Default().Gateway)
				}
			case "backends":
				exampleBase := backendBase
				if needs, ok := e.field("Needs"); ok { // keys that need another key
					exampleBase = "[backends.x]\n" + needs + "\n"
				}
				if _, err := load(t, exampleBase+example+"\n"); err != nil {
					t.Errorf("example %q: %v", example, err)
				}
				if strings.HasPrefix(def, "none") || name == "command" || name == "url" {
					return // required, one of two, or optional without a value: no default
				}
				unset, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": backendBase}))
				if err != nil {
					t.Fatal(err)
				}
				compared := false
				for _, v := range defaultValues(def) {
					set, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": backendBase + name + " = " + v + "\n"}))
					if err != nil {
						continue
					}
					compared = true
					if got, want := set.Backends["x"], unset.Backends["x"]; !got.Equal(want) {
						t.Errorf("documented default %q is not the real default:\n got %+v\nwant %+v", def, got, want)
					}
				}
				if !compared {
					t.Errorf("default %q holds no TOML value to compare with the real default", def)
				}
			case "clients":
				checkClientKey(t, name, def, example)
			case "oauth":
				needs, _ := e.field("Needs")
				checkOAuthKey(t, key, name, def, example, needs)
			case "profiles":
				checkProfileKey(t, name, def, example)
			case "telemetry":
				checkTelemetryKey(t, name, def, example)
			case "composites":
				const base = "[composites.x]\nsteps = [{ tool = \"a__b\" }]\n"
				exampleBase := base
				if name == "steps" {
					exampleBase = "[composites.x]\ninput_schema = { properties = { repo = { type = \"string\" } } }\n"
				}
				if _, err := load(t, exampleBase+example+"\n"); err != nil {
					t.Errorf("example %q: %v", example, err)
				}
				if strings.HasPrefix(def, "none") {
					return
				}
				unset, err := load(t, base)
				if err != nil {
					t.Fatal(err)
				}
				compared := false
				for _, v := range defaultValues(def) {
					set, err := load(t, base+name+" = "+v+"\n")
					if err != nil {
						continue
					}
					compared = true
					if got, want := set.Composites["x"], unset.Composites["x"]; !got.Equal(want) {
						t.Errorf("documented default %q is not the real default:\n got %+v\nwant %+v", def, got, want)
					}
				}
				if !compared {
					t.Errorf("default %q holds no TOML value to compare with the real default", def)
				}
			}
		})
	}
}

// defaultValues returns the TOML values a documented default may hold: all
// of it, the part before a parenthesis, and what is in the parenthesis, with
// the markup removed and the placeholder NAME as backend "x".
func defaultValues(def string) []string {
	def = strings.ReplaceAll(def, "*", "")
	def = regexp.MustCompile(`_([A-Z]+)_`).ReplaceAllString(def, "$1")
	def = strings.ReplaceAll(def, "NAME", "x")
	vals := []string{def}
	if before, _, ok := strings.Cut(def, " ("); ok {
		vals = append(vals, before)
	}
	if i := strings.LastIndex(def, "("); i >= 0 && strings.HasSuffix(def, ")") {
		vals = append(vals, def[i+1:len(def)-1])
	}
	return vals
}

// emptyIsNil returns g with empty lists made nil: "[]" in a file and a
// default of no entries mean the same.
func emptyIsNil(g config.Gateway) config.Gateway {
	for _, l := range []*[]string{&g.Listen, &g.AllowedOrigins, &g.AllowedHosts} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return g
}

// TestConfigExample loads the complete example of mcpgate.toml(5): the
// main file and the drop-ins, in the order the page shows them.
func TestConfigExample(t *testing.T) {
	p := readPage(t, "mcpgate.toml.5.scd")
	blocks := codeBlocks(p.sections["EXAMPLE"])
	if len(blocks) < 6 {
		t.Fatalf("EXAMPLE has %d code blocks, want the main file and five drop-ins", len(blocks))
	}
	path := testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml":          blocks[0],
		"conf.d/github.toml":    blocks[1],
		"conf.d/notes.toml":     blocks[2],
		"conf.d/client-ci.toml": blocks[3],
		"conf.d/remote.toml":    blocks[4],
		"conf.d/oauth.toml":     blocks[5],
		"conf.d/ignored.conf":   "not TOML, and not read",
	})
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var commands []string
	var remotes []string
	for _, b := range cfg.EnabledBackends() {
		if b.IsRemote() {
			remotes = append(remotes, b.Name)
			continue
		}
		commands = append(commands, filepath.Base(b.Command))
	}
	if got := strings.Join(remotes, " "); got != "copilot team" {
		t.Errorf("remote backends %q, want copilot and team", got)
	}
	if got := strings.Join(commands, " "); got != "npx npx node" {
		t.Errorf("backends run %q, want an npx server, another npx server and a node server", got)
	}
	if len(cfg.Backends["github"].Env) == 0 {
		t.Error("the example shows no secret in env")
	}
	if !cfg.OAuth.Enabled() || cfg.Clients["admins"].OAuthIssuer != "corp" {
		t.Errorf("the example's OAuth is %+v", cfg.OAuth)
	}
	if cfg.Clients["ci"] == nil || cfg.Clients["dev"] == nil {
		t.Errorf("the example's clients are %v, want ci and dev", cfg.Clients)
	}
}

// codeBlocks returns the contents of the ``` blocks among lines.
func codeBlocks(lines []string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, l := range lines {
		switch {
		case strings.TrimSpace(l) == "```":
			if in {
				blocks = append(blocks, strings.Join(cur, "\n")+"\n")
				cur = nil
			}
			in = !in
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// TestCtlCommands checks that mcpgatectl(1) documents every command (as
// internal/ctl lists them) and every option "mcpgatectl help" lists.
func TestCtlCommands(t *testing.T) {
	bin := testutil.Build(t)
	out, err := exec.Command(bin.Ctl, "help").Output()
	if err != nil {
		t.Fatalf("mcpgatectl help: %v", err)
	}
	helpCommands, options := helpLists(string(out))
	commands := ctl.Commands()
	if len(helpCommands) < len(commands) {
		t.Errorf("mcpgatectl help lists %q, fewer than the commands %q", helpCommands, commands)
	}
	t.Logf("mcpgatectl help lists commands %q and options %q", commands, options)
	if len(commands) < 10 {
		t.Fatalf("found only %q in the help's Commands:\n%s", commands, out)
	}
	p := readPage(t, "mcpgatectl.1.scd")
	documented := entries(p.sections["COMMANDS"])
	for _, c := range commands {
		if _, ok := documented[c]; !ok {
			t.Errorf("%s: command %q has no entry *%s* in COMMANDS", p.name, c, c)
		}
	}
	documentedOpts := entries(p.sections["OPTIONS"])
	for _, o := range options {
		if _, ok := documentedOpts[o]; !ok {
			t.Errorf("%s: option %q has no entry *%s* in OPTIONS", p.name, o, o)
		}
	}
	// Every exit status of the help text has an entry.
	exits := entries(p.sections["EXIT STATUS"])
	m := regexp.MustCompile(`(?s)Exit status: (.*)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no exit statuses in the help:\n%s", out)
	}
	for _, code := range regexp.MustCompile(`\b(\d+) [a-z]`).FindAllStringSubmatch(m[1], -1) {
		if _, ok := exits[code[1]]; !ok {
			t.Errorf("%s: exit status %s has no entry in EXIT STATUS", p.name, code[1])
		}
	}
}

// helpLists returns the command names and long options of the help text.
func helpLists(help string) (commands, options []string) {
	section := ""
	cmd := regexp.MustCompile(`^  ([a-z][a-z-]*)\b`)
	opt := regexp.MustCompile(`^  (--[a-z][a-z-]*)\b`)
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			section = line
		case section == "Commands:":
			if m := cmd.FindStringSubmatch(line); m != nil {
				commands = append(commands, m[1])
			}
		case section == "Options:":
			if m := opt.FindStringSubmatch(line); m != nil {
				options = append(options, m[1])
			}
		}
	}
	return commands, options
}

// TestDBusMembers checks that mcpgate-dbus(7) documents every interface,
// method, property and signal of the introspection data, and every error.
func TestDBusMembers(t *testing.T) {
	var node struct {
		Interfaces []struct {
			Name    string `xml:"name,attr"`
			Members []struct {
				XMLName xml.Name
				Name    string `xml:"name,attr"`
			} `xml:",any"`
		} `xml:"interface"`
	}
	if err := xml.Unmarshal(dbusfiles.Introspection, &node); err != nil {
		t.Fatal(err)
	}
	p := readPage(t, "mcpgate-dbus.7.scd")
	if len(node.Interfaces) == 0 {
		t.Fatal("no interfaces in the introspection data")
	}
	for _, iface := range node.Interfaces {
		lines, ok := p.sections[iface.Name]
		if !ok {
			t.Errorf("%s: no section # %s", p.name, iface.Name)
			continue
		}
		text := strings.Join(lines, "\n")
		for _, m := range iface.Members {
			if !strings.Contains(text, "*"+m.Name+"*") {
				t.Errorf("%s: %s %s.%s is not documented in its section", p.name, m.XMLName.Local, iface.Name, m.Name)
			}
		}
	}
	for _, name := range []string{dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManageAction,
		dbusapi.ErrorNoSuchBackend, dbusapi.ErrorAccessDenied, dbusapi.ErrorInvalidConfig, dbusapi.ErrorFailed,
		dbusapi.TokensAction, dbusapi.ErrorNoSuchClient, dbusapi.ErrorNoSuchToken} {
		if !strings.Contains(p.text, name) {
			t.Errorf("%s does not mention %s", p.name, name)
		}
	}
}

// TestJournal checks that mcpgated(8) documents every MESSAGE_ID and every
// MCPGATE_ field the journal package writes by name.
func TestJournal(t *testing.T) {
	p := readPage(t, "mcpgated.8.scd")
	journal := strings.Join(p.sections["JOURNAL FIELDS"], "\n")
	if journal == "" {
		t.Fatalf("%s has no JOURNAL FIELDS section", p.name)
	}
	ids, fields := journalNames(t, filepath.Join(testutil.ModuleRoot(), "internal", "journal"))
	if len(ids) < 5 {
		t.Fatalf("found only %d MessageID constants", len(ids))
	}
	for name, id := range ids {
		if !strings.Contains(journal, id) {
			t.Errorf("%s: MESSAGE_ID %s (%s) is not documented", p.name, id, name)
		}
	}
	for _, f := range append(fields, "TRACE_ID", "SPAN_ID") { // those of a traced call (journal.FieldTraceID)
		if !strings.Contains(unescape(journal), f) {
			t.Errorf("%s: journal field %s is not documented", p.name, f)
		}
	}
}

// journalNames parses the journal package: its MessageID constants (name →
// id) and the MCPGATE_ field names in its string literals.
func journalNames(t *testing.T, dir string) (ids map[string]string, fields []string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids = map[string]string{}
	field := regexp.MustCompile(`^(MCPGATE_[A-Z0-9_]*[A-Z0-9])=?$`)
	seen := map[string]bool{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "MessageID" {
						for i, v := range n.Values {
							if lit, ok := v.(*ast.BasicLit); ok {
								s, _ := strconv.Unquote(lit.Value)
								ids[n.Names[i].Name] = s
							}
						}
					}
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						s, _ := strconv.Unquote(n.Value)
						if m := field.FindStringSubmatch(s); m != nil && !seen[m[1]] {
							seen[m[1]] = true
							fields = append(fields, m[1])
						}
					}
				}
				return true
			})
		}
	}
	return ids, fields
}

// TestPagesBuild converts every page with scdoc and formats it with man,
// failing on any warning (lintian checks the installed pages the same way).
func TestPagesBuild(t *testing.T) {
	scdoc, err := exec.LookPath("scdoc")
	if err != nil {
		testutil.Unavailable(t, "scdoc is not installed (packaging/ci/deps.sh installs it)")
	}
	pages, _ := filepath.Glob("*.scd")
	if len(pages) != 4 {
		t.Errorf("found pages %q, want mcpgated(8), mcpgatectl(1), mcpgate.toml(5) and mcpgate-dbus(7)", pages)
	}
	manPath, manErr := exec.LookPath("man")
	for _, src := range pages {
		t.Run(src, func(t *testing.T) {
			in, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			out := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".scd"))
			var roff, stderr bytes.Buffer
			cmd := exec.Command(scdoc)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = in, &roff, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("scdoc: %v\n%s", err, stderr.String())
			}
			if err := os.WriteFile(out, roff.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if manErr != nil {
				testutil.Unavailable(t, "man is not installed (packaging/ci/deps.sh installs man-db); not checking for formatting warnings")
			}
			cmd = exec.Command(manPath, "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", out)
			cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "MANROFFSEQ=", "MANWIDTH=80")
			stderr.Reset()
			cmd.Stdout, cmd.Stderr = nil, &stderr
			if err := cmd.Run(); err != nil || stderr.Len() > 0 {
				t.Errorf("man --warnings: %v\n%s", err, stderr.String())
			}
		})
	}
}

// checkClientKey checks a [clients.NAME] key's example and default, in a
// client that has an identity of its own.
// checkProfileKey checks a profile key's example and documented default.
func checkProfileKey(t *testing.T, name, def, example string) {
	t.Helper()
	const base = "[profiles.x]\n"
	load := func(text string) (*config.Config, error) {
		return config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": text}))
	}
	if _, err := load(base + example + "\n"); err != nil {
		t.Errorf("example %q: %v", example, err)
	}
	unset, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append([]string{strings.ReplaceAll(def, "\\", "")}, defaultValues(def)...) {
		set, err := load(base + name + " = " + v + "\n")
		if err != nil {
			continue
		}
		got, want := set.Profiles["x"], unset.Profiles["x"]
		if name == "annotations" && len(got.Annotations) == 0 && len(want.Annotations) == 0 {
			return // {} and unset select the same
		}
		if !got.Equal(want) {
			t.Errorf("documented default %q is not the real default:\n got %+v\nwant %+v", def, got, want)
		}
		return
	}
	t.Errorf("default %q holds no TOML value to compare with the real default", def)
}

func checkTelemetryKey(t *testing.T, name, def, example string) {
	t.Helper()
	load := func(text string) (*config.Config, error) {
		return config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[telemetry]\n" + text}))
	}
	if _, err := load(example + "\n"); err != nil {
		t.Errorf("example %q: %v", example, err)
	}
	set, err := load(name + " = " + def + "\n")
	if err != nil {
		t.Fatalf("default %q: %v", def, err)
	}
	if got, want := set.Telemetry, config.Default().Telemetry; got.Traces != want.Traces || got.Metrics != want.Metrics {
		t.Errorf("documented default %q is not the real default: got %+v, want %+v", def, got, want)
	}
}

func checkClientKey(t *testing.T, name, def, example string) {
	t.Helper()
	base := "[clients.x]\nunix_users = [\"0\"]\n"
	if name == "profile" {
		base = "[profiles.readonly]\n" + base
	}
	if name == "unix_users" {
		base = "[clients.x]\nunix_groups = [\"0\"]\n"
	}
	if strings.HasPrefix(name, "oauth_") {
		base = oauthIssuerBase + "[clients.x]\noauth_groups = [\"g\"]\n"
		if name == "oauth_groups" {
			base = oauthIssuerBase + "[clients.x]\noauth_subjects = [\"s\"]\n"
		}
	}
	load := func(text string) (*config.Config, error) {
		return config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": text}))
	}
	if _, err := load(base + example + "\n"); err != nil {
		t.Errorf("example %q: %v", example, err)
	}
	if strings.HasPrefix(def, "none") {
		return // unset: nothing to compare
	}
	unset, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	// A glob's "*" is the value, not markup: try the default as written too.
	for _, v := range append([]string{def}, defaultValues(def)...) {
		set, err := load(base + name + " = " + v + "\n")
		if err != nil {
			continue
		}
		if got, want := set.Clients["x"], unset.Clients["x"]; !got.Equal(want) {
			t.Errorf("documented default %q is not the real default:\n got %+v\nwant %+v", def, got, want)
		}
		return
	}
	t.Errorf("default %q holds no TOML value to compare with the real default", def)
}
