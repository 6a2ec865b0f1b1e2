package ctl

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/config"
)

// runImport runs "mcpgatectl import FILE": it reads an MCP client's server
// list (Claude Desktop's claude_desktop_config.json, Claude Code's
// .mcp.json, VS Code's mcp.json or settings.json, and the many editors that
// copy one of them) and prints the equivalent [backends.NAME] tables for
// mcpgate's configuration on stdout, with a summary on stderr. It returns
// 0 when it printed them, 1 when the file cannot be read or holds no server
// list, 2 for bad arguments.
func runImport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpgatectl import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: mcpgatectl import FILE\n\n"+
			"Prints the [backends.NAME] tables for mcpgate's configuration equivalent to the MCP\n"+
			"servers in FILE: a claude_desktop_config.json, .mcp.json or VS Code mcp.json.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "mcpgatectl import: give one file, e.g. mcpgatectl import ~/.config/Claude/claude_desktop_config.json")
		return 2
	}
	path := fs.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgatectl import: %v\n", err)
		return 1
	}
	out, summary, err := importServers(path, data)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgatectl import: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "mcpgatectl import: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "mcpgatectl import: %s\n", summary)
	return 0
}

// importDoc is the part of a client configuration that lists servers:
// "mcpServers" (Claude Desktop, Claude Code, Cursor, Windsurf, Cline),
// "servers" and "inputs" (VS Code's mcp.json), or both under "mcp" (VS
// Code's settings.json).
type importDoc struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	Servers    map[string]json.RawMessage `json:"servers"`
	Inputs     []importInput              `json:"inputs"`
	MCP        *struct {
		Servers map[string]json.RawMessage `json:"servers"`
		Inputs  []importInput              `json:"inputs"`
	} `json:"mcp"`
}

// importInput is a VS Code input variable, which VS Code asks the user for.
type importInput struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Password    bool   `json:"password"`
}

// importEntry is one server of any of the formats.
type importEntry struct {
	Command       json.RawMessage            `json:"command"`
	Args          []json.RawMessage          `json:"args"`
	Env           map[string]json.RawMessage `json:"env"`
	Cwd           json.RawMessage            `json:"cwd"`
	Type          string                     `json:"type"`
	Transport     string                     `json:"transport"`
	TransportType string                     `json:"transportType"`
	URL           string                     `json:"url"`
	ServerURL     string                     `json:"serverUrl"`
	Headers       map[string]json.RawMessage `json:"headers"`
	EnvFile       string                     `json:"envFile"`
	Disabled      bool                       `json:"disabled"`
}

// importServer is an entry with its names.
type importServer struct {
	orig  string // the name in the file
	name  string // the backend name
	entry importEntry
}

// importer accumulates the output.
type importer struct {
	file   string
	inputs map[string]importInput
	out    bytes.Buffer
	todos  int
}

// importServers converts the configuration data read from file. It
// returns the TOML and a one-line summary.
func importServers(file string, data []byte) (out []byte, summary string, err error) {
	var doc importDoc
	if err := json.Unmarshal(importStripJSONC(data), &doc); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := importPosition(data, syn.Offset)
			return nil, "", fmt.Errorf("%s:%d:%d: invalid JSON: %v", file, line, col, err)
		}
		return nil, "", fmt.Errorf("%s: %v", file, err)
	}
	im := &importer{file: file, inputs: map[string]importInput{}}
	lists := []struct {
		key     string
		servers map[string]json.RawMessage
	}{{"mcpServers", doc.MCPServers}, {"servers", doc.Servers}}
	inputs := doc.Inputs
	if doc.MCP != nil {
		lists = append(lists, struct {
			key     string
			servers map[string]json.RawMessage
		}{"mcp.servers", doc.MCP.Servers})
		inputs = append(inputs, doc.MCP.Inputs...)
	}
	for _, in := range inputs {
		im.inputs[in.ID] = in
	}
	var servers []*importServer
	found := false
	for _, l := range lists {
		if l.servers == nil {
			continue
		}
		found = true
		for _, name := range slices.Sorted(maps.Keys(l.servers)) {
			s := &importServer{orig: name}
			if err := json.Unmarshal(l.servers[name], &s.entry); err != nil {
				return nil, "", fmt.Errorf("%s: server %q in %q: %v", file, name, l.key, importTypeError(err))
			}
			servers = append(servers, s)
		}
	}
	if !found {
		return nil, "", fmt.Errorf(`%s: no "mcpServers" or "servers" object; is this a claude_desktop_config.json, .mcp.json or VS Code mcp.json?`, file)
	}
	slices.SortStableFunc(servers, func(a, b *importServer) int { return strings.Compare(a.orig, b.orig) })
	importNames(servers)

	im.printf("# mcpgate backends imported from %s by \"mcpgatectl import\".\n", file)
	im.comment("Review them, save them as /etc/mcpgate/conf.d/imported.toml (or add them to " + config.DefaultPath + "), " +
		"check with \"mcpgatectl check-config\" and apply with \"systemctl reload mcpgate\". " +
		"Each backend's tools appear as NAME__TOOL; set tool_prefix to change that. " +
		"Lines marked TODO need your attention.")
	var local, remote, skipped int
	for _, s := range servers {
		im.printf("\n")
		switch im.server(s) {
		case "local":
			local++
		case "remote":
			remote++
		default:
			skipped++
		}
	}
	if len(servers) == 0 {
		im.printf("\n# %s lists no servers.\n", file)
	}
	summary = importCount(local+remote, "backend") + " from " + file
	if remote > 0 {
		summary += " (" + strconv.Itoa(remote) + " remote)"
	}
	if skipped > 0 {
		summary += ", " + importCount(skipped, "server") + " skipped"
	}
	if im.todos > 0 {
		summary += "; check the output's " + importCount(im.todos, "TODO comment")
	}
	return im.out.Bytes(), summary, nil
}

// importTypeError makes json's type errors name the key rather than Go's
// field.
func importTypeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%q must not be %s", te.Field, te.Value)
	}
	return err
}

// importNames gives each server a valid, unique backend name: names that
// are valid already are kept; the others have every other character
// replaced with "_", and a number appended when that is taken.
func importNames(servers []*importServer) {
	valid := importBackendName
	taken := map[string]bool{}
	for _, s := range servers {
		if valid.MatchString(s.orig) && !taken[s.orig] {
			s.name = s.orig
			taken[s.name] = true
		}
	}
	for _, s := range servers {
		if s.name != "" {
			continue
		}
		base := []rune(s.orig)
		for i, r := range base {
			if r >= utf8.RuneSelf || !importKeyChars.MatchString(string(r)) {
				base[i] = '_'
			}
		}
		name := string(base[:min(len(base), 64)])
		if name == "" {
			name = "server"
		}
		for n := 2; taken[name]; n++ {
			suffix := "_" + strconv.Itoa(n)
			name = string(base[:min(len(base), 64-len(suffix))]) + suffix
			if len(base) == 0 {
				name = "server" + suffix
			}
		}
		s.name = name
		taken[name] = true
	}
}

// server prints one server and returns what it became: "local", "remote"
// or "skipped".
func (im *importer) server(s *importServer) string {
	e := &s.entry
	if s.name != s.orig {
		im.comment(fmt.Sprintf("Named %q in %s; backend names use only letters, digits, \"_\" and \"-\".", s.orig, im.file))
	}
	command, cmdOK := importString(e.Command)
	kind := strings.ToLower(cmp.Or(e.Type, e.Transport, e.TransportType))
	url := cmp.Or(e.URL, e.ServerURL)
	switch {
	case slices.Contains(importRemoteKinds, kind) || e.Command == nil && url != "":
		return im.remote(s, kind, url)
	case e.Command == nil:
		im.todo(fmt.Sprintf("%q has neither a command nor a url; it was not imported.", s.orig))
		return "skipped"
	case !cmdOK || command == "":
		im.todo(fmt.Sprintf("%q has no usable command (%s); it was not imported.", s.orig, string(e.Command)))
		return "skipped"
	}

	args := make([]string, 0, len(e.Args))
	for i, a := range e.Args {
		v, ok := importString(a)
		if !ok {
			im.todo(fmt.Sprintf("%q: argument %d is %s, not a string; it was not imported.", s.orig, i+1, string(a)))
			return "skipped"
		}
		args = append(args, v)
	}
	cwd, _ := importString(e.Cwd)
	for _, v := range append([]string{command, cwd}, args...) {
		if strings.ContainsRune(v, 0) {
			im.todo(fmt.Sprintf("%q: its command line contains a NUL character, which no command line can carry; it was not imported.", s.orig))
			return "skipped"
		}
	}

	// Notes about the command line, printed above the table.
	var refs []string
	for _, v := range append([]string{command, cwd}, args...) {
		refs = append(refs, importRefs(v)...)
	}
	refs = importUniq(refs)
	if len(refs) > 0 {
		im.todo(fmt.Sprintf("Disabled until you replace %s in the command line: mcpgate does not expand variables. "+
			"Then delete \"enabled = false\".", im.describeRefs(refs)))
	}
	for _, v := range append([]string{command, cwd}, args...) {
		if note := importPathNote(v); note != "" {
			im.todo(note)
			break
		}
	}
	switch command[strings.LastIndexAny(command, `/\`)+1:] {
	case "docker":
		im.comment("mcpgated runs as user mcpgate: add it to group docker so that it may run containers.")
	case "podman":
		im.comment("mcpgated runs as user mcpgate: podman must work for that user (subuids, and its home /var/lib/mcpgate).")
	}
	if e.Disabled {
		im.comment("Disabled in " + im.file + ".")
	}
	if e.EnvFile != "" {
		im.todo(fmt.Sprintf("mcpgate does not read envFile %q: copy the variables it sets into [backends.%s.env].", e.EnvFile, s.name))
	}

	im.printf("[backends.%s]\n", s.name)
	im.printf("command = %s\n", importQuote(command))
	if len(args) > 0 {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = importQuote(a)
		}
		im.printf("args = [%s]\n", strings.Join(quoted, ", "))
	}
	if cwd != "" {
		im.printf("cwd = %s\n", importQuote(cwd))
	}
	if len(refs) > 0 || e.Disabled {
		im.printf("enabled = false\n")
	}
	if len(e.Env) > 0 {
		im.env(s)
	}
	return "local"
}

// env prints a server's environment as a [backends.NAME.env] table. Values
// that mcpgate cannot use as they are (references to VS Code inputs or to
// the editor's environment) are left commented out with what to do.
func (im *importer) env(s *importServer) {
	reserved := config.ReservedEnv()
	im.printf("\n")
	for _, raw := range s.entry.Env {
		if v, ok := importString(raw); ok && len(importRefs(v)) == 0 {
			im.comment(fmt.Sprintf("Values copied from %s. If they are secrets, keep the file private (chmod 0640, group mcpgate).", im.file))
			break
		}
	}
	im.printf("[backends.%s.env]\n", s.name)
	for _, key := range slices.Sorted(maps.Keys(s.entry.Env)) {
		raw := s.entry.Env[key]
		v, ok := importString(raw)
		switch {
		case !ok:
			im.todo(fmt.Sprintf("%s is %s, not a string; write its value as a string.", key, string(raw)))
			im.printf("# %s = %s\n", importKey(key), importCompact(raw))
		case !importEnvName.MatchString(key):
			im.todo(fmt.Sprintf("%q is not a valid environment variable name for mcpgate (letters, digits and \"_\", not starting with a digit).", key))
			im.printf("# %s = %s\n", importKey(key), importQuote(v))
		case slices.Contains(reserved, key):
			im.todo(fmt.Sprintf("%s is reserved: mcpgated takes it from systemd and never passes it to backends.", key))
			im.printf("# %s = %s\n", key, importQuote(v))
		case strings.ContainsRune(v, 0):
			im.todo(fmt.Sprintf("%s contains a NUL character, which no environment can carry.", key))
			im.printf("# %s = %s\n", key, importQuote(v))
		case len(importRefs(v)) > 0:
			im.todo(fmt.Sprintf("%s refers to %s. mcpgate cannot ask for values or see your editor's environment: "+
				"write the value in and uncomment the line.", key, im.describeRefs(importUniq(importRefs(v)))))
			im.printf("# %s = %s\n", key, importQuote(v))
		default:
			im.printf("%s = %s\n", key, importQuote(v))
		}
	}
}

// printf writes to the output.
func (im *importer) printf(format string, args ...any) {
	fmt.Fprintf(&im.out, format, args...)
}

// comment writes text as comment lines of at most about 80 columns.
func (im *importer) comment(text string) {
	line := "#"
	for _, word := range strings.Fields(text) {
		if len(line) > 1 && len(line)+1+len(word) > 79 {
			im.out.WriteString(line + "\n")
			line = "#"
		}
		line += " " + word
	}
	im.out.WriteString(line + "\n")
}

// todo writes a comment that needs the user's attention.
func (im *importer) todo(text string) {
	im.todos++
	im.comment("TODO: " + text)
}

// Patterns of the import.
var (
	// importRefVar is a variable reference: ${input:ID}, ${env:NAME} and
	// ${workspaceFolder} (VS Code), ${NAME} and ${NAME:-default} (Claude
	// Code).
	importRefVar      = regexp.MustCompile(`\$\{[^}]*\}`)
	importBackendName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) // as config accepts
	importKeyChars    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)      // a bare TOML key
	importEnvName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	importNonAlnum    = regexp.MustCompile(`[^A-Za-z0-9]+`)
)

// importRemoteKinds are the transports that mean a server is reached over
// the network.
var importRemoteKinds = []string{"http", "sse", "streamable-http", "streamablehttp", "streamable_http", "ws", "websocket", "remote"}

// importRefs returns the variable references in s.
func importRefs(s string) []string {
	return importRefVar.FindAllString(s, -1)
}

// describeRefs says what the references are.
func (im *importer) describeRefs(refs []string) string {
	var parts []string
	for _, ref := range refs {
		inner := ref[2 : len(ref)-1]
		switch kind, name, colon := strings.Cut(inner, ":"); {
		case kind == "input":
			d := fmt.Sprintf("%s (a VS Code input", ref)
			if in, ok := im.inputs[name]; ok && in.Description != "" {
				d += ": " + strconv.Quote(in.Description)
			}
			if im.inputs[name].Password {
				d += ", a password"
			}
			parts = append(parts, d+")")
		case kind == "env":
			parts = append(parts, fmt.Sprintf("%s (the editor's environment variable %s)", ref, name))
		case importEnvName.MatchString(kind) && (colon && strings.HasPrefix(name, "-") || !colon && strings.ToUpper(kind) == kind):
			parts = append(parts, fmt.Sprintf("%s (the environment variable %s, which Claude Code expands)", ref, kind))
		default:
			parts = append(parts, fmt.Sprintf("%s (a VS Code variable)", ref))
		}
	}
	return strings.Join(parts, ", ")
}

// importPathNote warns about a path mcpgated cannot use as it is.
func importPathNote(v string) string {
	switch {
	case strings.HasPrefix(v, "~"):
		return fmt.Sprintf("%q starts with \"~\", which only a shell expands; mcpgated runs as user mcpgate and cannot see your home (ProtectHome=yes): use a path outside /home, such as /srv.", v)
	case strings.HasPrefix(v, "/home/") || v == "/root" || strings.HasPrefix(v, "/root/") || strings.HasPrefix(v, "/run/user/"):
		return fmt.Sprintf("%q is in a home directory, which mcpgate.service cannot see (ProtectHome=yes): move it, e.g. under /srv, or relax ProtectHome= with a drop-in.", v)
	case strings.HasPrefix(v, "/Users/") || len(v) > 2 && v[1] == ':' && (v[2] == '\\' || v[2] == '/'):
		return fmt.Sprintf("%q is a macOS or Windows path: change it to a path on this machine (outside /home, which mcpgate.service cannot see).", v)
	}
	return ""
}

// importString returns a JSON string's value, or the text of a number or
// boolean, as the clients pass those on.
func importString(raw json.RawMessage) (string, bool) {
	var v any
	if raw == nil || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case float64, bool:
		return string(bytes.TrimSpace(raw)), true
	}
	return "", false
}

// importQuote writes s as a TOML basic string.
func importQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// importKey writes a key bare when TOML allows it, else quoted.
func importKey(k string) string {
	if importKeyChars.MatchString(k) {
		return k
	}
	return importQuote(k)
}

// importCompact returns raw JSON on one line.
func importCompact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// importCount says "1 thing" or "N things".
func importCount(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// importUniq returns s without repeats, in order.
func importUniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// importStripJSONC blanks out the comments and trailing commas that VS
// Code's JSON with comments allows, keeping every other byte where it
// was, so that error offsets still point into the original.
func importStripJSONC(data []byte) []byte {
	out := bytes.Clone(data)
	blank := func(i, j int) {
		for ; i < j; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	lastComma := -1 // a comma not yet followed by a value
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '"':
			lastComma = -1
			for i++; i < len(out) && out[i] != '"'; i++ {
				if out[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			j := bytes.IndexByte(out[i:], '\n')
			if j < 0 {
				j = len(out) - i
			}
			blank(i, i+j)
			i += j - 1
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			j := bytes.Index(out[i+2:], []byte("*/"))
			if j < 0 {
				return out // unterminated: let the parser report it
			}
			blank(i, i+2+j+2)
			i += 2 + j + 1
		case c == ',':
			lastComma = i
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			lastComma = -1
		}
	}
	return out
}

// importPosition turns a byte offset into a line and column.
func importPosition(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}
