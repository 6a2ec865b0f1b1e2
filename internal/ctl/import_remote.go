package ctl

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// remote prints a server the client reaches over the network as a remote
// backend, with its headers. Header values that refer to variables become
// ${credential:NAME}: mcpgate reads secrets from systemd credentials, not
// from an editor's prompts or environment. It returns "remote", or
// "skipped" for what mcpgate cannot reach (no url, WebSocket).
func (im *importer) remote(s *importServer, kind, rawURL string) string {
	what := "a remote server"
	if kind != "" {
		what += fmt.Sprintf(" (type %q)", kind)
	}
	u, err := url.Parse(rawURL)
	switch {
	case rawURL == "":
		im.todo(fmt.Sprintf("%q is %s without a url; it was not imported.", s.orig, what))
		return "skipped"
	case kind == "ws" || kind == "websocket" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		im.todo(fmt.Sprintf("%q is %s at %s; mcpgate reaches servers over http:// or https:// only (Streamable HTTP or SSE); it was not imported.", s.orig, what, rawURL))
		return "skipped"
	case u.User != nil:
		im.todo(fmt.Sprintf("%q: its url holds a user name or password, which mcpgate refuses; it was not imported. Send them in headers instead.", s.orig))
		return "skipped"
	}
	im.comment(fmt.Sprintf("%s at %s, reached over HTTP.", strings.ToUpper(what[:1])+what[1:], rawURL))
	var headerLines []string
	var creds []string // credentials the headers now need
	literal := false
	for _, h := range slices.Sorted(maps.Keys(s.entry.Headers)) {
		raw := s.entry.Headers[h]
		v, ok := importString(raw)
		switch {
		case !ok:
			im.todo(fmt.Sprintf("header %s is %s, not a string; write its value as a string.", h, string(raw)))
			headerLines = append(headerLines, fmt.Sprintf("# %s = %s", importKey(h), importCompact(raw)))
		case strings.ContainsAny(v, "\r\n\x00"):
			im.todo(fmt.Sprintf("header %s holds a line break or NUL, which no header can carry.", h))
			headerLines = append(headerLines, fmt.Sprintf("# %s = %s", importKey(h), importQuote(v)))
		case len(importRefs(v)) == 0:
			literal = true
			headerLines = append(headerLines, fmt.Sprintf("%s = %s", importKey(h), importQuote(v)))
		default:
			cv, names, ok := importCredentialRefs(v)
			if !ok {
				im.todo(fmt.Sprintf("header %s refers to %s, which mcpgate cannot fill in: write the value in and uncomment the line.", h, im.describeRefs(importUniq(importRefs(v)))))
				headerLines = append(headerLines, fmt.Sprintf("# %s = %s", importKey(h), importQuote(v)))
				continue
			}
			creds = append(creds, names...)
			headerLines = append(headerLines, fmt.Sprintf("%s = %s", importKey(h), importQuote(cv)))
		}
	}
	creds = importUniq(creds)
	if len(creds) > 0 {
		quoted := make([]string, len(creds))
		for i, c := range creds {
			quoted[i] = fmt.Sprintf("LoadCredential=%s (the secret in /etc/credstore/%s)", c, c)
		}
		im.todo(fmt.Sprintf("Disabled until the %s it sends can be read: add %s to mcpgate.service with \"systemctl edit mcpgate\" "+
			"(or put the files in [gateway] credentials_directory), then delete \"enabled = false\".",
			importCount(len(creds), "credential"), strings.Join(quoted, " and ")))
	}
	if literal {
		im.comment(fmt.Sprintf("Header values copied from %s. If they are secrets, keep the file private (chmod 0640, group mcpgate), or move them into a credential: ${credential:NAME}.", im.file))
	}
	if s.entry.Disabled {
		im.comment("Disabled in " + im.file + ".")
	}
	im.printf("[backends.%s]\n", s.name)
	im.printf("url = %s\n", importQuote(rawURL))
	if kind == "sse" {
		im.printf("transport = \"sse\"\n")
	}
	if len(creds) > 0 || s.entry.Disabled {
		im.printf("enabled = false\n")
	}
	if len(headerLines) > 0 {
		im.printf("\n[backends.%s.headers]\n%s\n", s.name, strings.Join(headerLines, "\n"))
	}
	return "remote"
}

// importCredentialRefs replaces each variable reference in v by a
// credential placeholder named after the variable: ${API_KEY} and
// ${env:API_KEY} by ${credential:api-key}, ${input:gh-token} by
// ${credential:gh-token}. It returns the credential names, or false when a
// reference names no variable (such as ${workspaceFolder}).
func importCredentialRefs(v string) (string, []string, bool) {
	var names []string
	ok := true
	out := importRefVar.ReplaceAllStringFunc(v, func(ref string) string {
		inner := ref[2 : len(ref)-1]
		kind, name, colon := strings.Cut(inner, ":")
		switch {
		case kind == "input" || kind == "env":
		case importEnvName.MatchString(kind) && (!colon || strings.HasPrefix(name, "-")) && strings.ToUpper(kind) == kind:
			name = kind // Claude Code's ${NAME} and ${NAME:-default}
		default:
			ok = false
			return ref
		}
		cred := strings.Trim(importNonAlnum.ReplaceAllString(strings.ToLower(name), "-"), "-")
		if cred == "" {
			ok = false
			return ref
		}
		names = append(names, cred)
		return "${credential:" + cred + "}"
	})
	return out, names, ok
}
