package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReservedEnv returns the environment variables mcpgated takes from systemd
// for itself. They are never passed to backends, so a backend's env may not
// set them either.
func ReservedEnv() []string {
	return []string{"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"}
}

// boundedName matches names of 1 to max bytes of one character class. A
// bounded repetition in a regexp ({1,64}) compiles to max copies of the
// class: the five names' patterns took mcpgated and mcpgatectl 3 ms to
// compile at every start.
type boundedName struct {
	re  *regexp.Regexp // the class, repeated with +
	max int
}

func (n boundedName) MatchString(s string) bool { return len(s) <= n.max && n.re.MatchString(s) }

var (
	backendName = boundedName{regexp.MustCompile(`^[A-Za-z0-9_-]+$`), 64}
	toolPrefix  = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)
)

// field decodes one key of a table into T; decode reports whether the value
// was valid (and so stored).
type field[T any] struct {
	key    string
	decode func(d *decoder, at keyPath, v any, dst *T) bool
}

func gatewayFields() []field[Gateway] {
	fields := []field[Gateway]{
		{"listen", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.strList(at, v, &g.Listen, checkListen)
		}},
		{"endpoint", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.Endpoint, checkEndpoint)
		}},
		{"request_timeout", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.RequestTimeout)
		}},
		{"shutdown_grace_period", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.ShutdownGracePeriod)
		}},
		{"drain_timeout", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.DrainTimeout)
		}},
		{"max_message_bytes", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxMessageBytes, 4096, math.MaxInt64)
		}},
		{"page_size", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.PageSize, 1, 10000)
		}},
		{"max_stream_events", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxStreamEvents, 16, 1<<20)
		}},
		{"allowed_origins", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.strList(at, v, &g.AllowedOrigins, checkNotEmpty)
		}},
		{"allowed_hosts", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.strList(at, v, &g.AllowedHosts, checkNotEmpty)
		}},
		{"bus", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.Bus, oneOf("system", "session", "none"))
		}},
		{"log_target", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.LogTarget, oneOf("auto", "journal", "stderr"))
		}},
		{"log_level", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.LogLevel, oneOf("debug", "info", "warn", "error"))
		}},
		{"log_rate_limit", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.rateLimit(at, v, &g.LogRateLimit)
		}},
		{"composite_prefix", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.CompositePrefix, checkToolPrefix)
		}},
		{"metrics_listen", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.MetricsListen, checkMetricsListen)
		}},
		{"status_resources", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.boolean(at, v, &g.StatusResources)
		}},
		{"server_card", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.str(at, v, &g.ServerCard, oneOf("identity", "tools", "off"))
		}},
	}
	fields = append(fields, limitFields()...)
	fields = append(fields, accessFields()...)
	fields = append(fields, healthFields(func(g *Gateway) *Health { return &g.Health })...)
	fields = append(fields, idleExitField(), firstListWaitField(), runnerField[Gateway](func(g *Gateway) *string { return &g.Runner }))
	return append(append(fields, integrityFields(func(g *Gateway) *Integrity { return &g.Integrity })...), stateDirectoryField())
}

func backendFields() []field[Backend] {
	fields := []field[Backend]{
		{"command", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.Command, checkCommand)
		}},
		{"args", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.Args, checkCredentialRefs)
		}},
		{"env", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.env(at, v, &b.Env)
		}},
		{"cwd", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.Cwd, nil)
		}},
		{"enabled", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.boolean(at, v, &b.Enabled)
		}},
		{"required", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.boolean(at, v, &b.Required)
		}},
		{"timeout", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.Timeout)
		}},
		{"max_call_duration", func(d *decoder, at keyPath, v any, b *Backend) bool {
			if v == "off" {
				b.MaxCallDuration = 0
				return true
			}
			return d.duration(at, v, &b.MaxCallDuration)
		}},
		{"client_request_timeout", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.ClientRequestTimeout)
		}},
		{"tool_prefix", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.ToolPrefix, checkToolPrefix)
		}},
		{"max_restarts", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return integer(d, at, v, &b.MaxRestarts, 0, math.MaxInt)
		}},
		{"restart_window", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.RestartWindow)
		}},
		{"restart_backoff_initial", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.RestartBackoffInitial)
		}},
		{"restart_backoff_max", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.RestartBackoffMax)
		}},
		{"log_rate_limit", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.rateLimit(at, v, &b.LogRateLimit)
		}},
		{"relay_client_requests", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.boolean(at, v, &b.RelayClientRequests)
		}},
		{"roots", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.Roots, checkRoot)
		}},
		{"inherit_env", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.InheritEnv, checkInheritEnv)
		}},
		{"transport", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.Transport, oneOf("stdio", "cli", "streamable-http", "sse"))
		}},
		{"tools", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.cliTools(at, v, b)
		}},
		{"adapter_file", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.adapterFile(at, v, b)
		}},
	}
	fields = append(fields, outputBackendFields()...)
	fields = append(fields, prerequisiteBackendFields()...)
	fields = append(fields, healthFields(func(b *Backend) *Health { return &b.Health })...)
	fields = append(fields, integrityFields(func(b *Backend) *Integrity { return &b.Integrity })...)
	fields = append(fields, callFields()...)
	fields = append(fields, remoteFields()...)
	fields = append(fields, runnerField[Backend](func(b *Backend) *string { return &b.Runner }))
	fields = append(fields, lifecycleFields()...)
	fields = append(fields, protocolFields()...)
	return append(fields, resourceFields()...)
}

// decodeTable decodes every key of t into dst, reporting unknown keys, and
// returns the keys whose values were refused.
func decodeTable[T any](d *decoder, at keyPath, t map[string]any, fields []field[T], dst *T) (refused map[string]bool) {
	refused = map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		i := slices.IndexFunc(fields, func(f field[T]) bool { return f.key == k })
		if i < 0 {
			known := make([]string, len(fields))
			for i, f := range fields {
				known[i] = f.key
			}
			d.unknown(at.child(k), known, "valid keys here: "+strings.Join(known, ", "))
			refused[k] = true
			continue
		}
		if !fields[i].decode(d, at.child(k), t[k], dst) {
			refused[k] = true
		}
	}
	return refused
}

// decoder turns one file's decoded document into typed values, reporting
// each problem at the position of its key.
type decoder struct {
	l *loader
	f *file
}

// fail reports a problem with the key at.
func (d *decoder) fail(at keyPath, format string, args ...any) {
	d.failAt(d.f.lookup(at), at, format, args...)
}

// failElem reports a problem with element i of the array at.
func (d *decoder) failElem(at keyPath, i int, format string, args ...any) {
	pos := d.f.lookup(at)
	if elems := d.f.elems[at.id()]; i < len(elems) && elems[i].line > 0 {
		pos = elems[i]
	}
	d.failAt(pos, at, format, args...)
}

func (d *decoder) failAt(pos position, at keyPath, format string, args ...any) {
	d.l.add(d.f.order, &Error{File: d.f.path, Line: pos.line, Col: pos.col, Key: at.String(), Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) unknown(at keyPath, known []string, hint string) {
	if s := closestKey(at[len(at)-1], known); s != "" {
		d.fail(at, "unknown key (did you mean %q?)", s)
		return
	}
	d.fail(at, "unknown key; %s", hint)
}

// wrongType reports a value of the wrong TOML type.
func (d *decoder) wrongType(at keyPath, v any, want, hint string) {
	d.fail(at, "expected %s, got %s; %s", want, describe(v), hint)
}

// describe names a decoded TOML value's type, with the value if it is short.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			return "a string"
		}
		return "string " + strconv.Quote(v)
	case int64:
		return "integer " + strconv.FormatInt(v, 10)
	case float64:
		return "float " + strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return "a date/time"
	}
}

func (d *decoder) table(at keyPath, v any, want, hint string) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		d.wrongType(at, v, want, hint)
	}
	return t, ok
}

// check returns "" for an acceptable string, else what is wrong and what to
// do.
type check func(string) string

func (d *decoder) str(at keyPath, v any, dst *string, c check) bool {
	s, ok := v.(string)
	if !ok {
		d.wrongType(at, v, "a string", "put the value in double quotes")
		return false
	}
	if msg := checkString(s, c); msg != "" {
		d.fail(at, "%s", msg)
		return false
	}
	*dst = s
	return true
}

func (d *decoder) strList(at keyPath, v any, dst *[]string, c check) bool {
	arr, ok := v.([]any)
	if !ok {
		d.wrongType(at, v, "an array of strings", `write ["…", "…"]`)
		return false
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			d.failElem(at, i, "entry %d: expected a string, got %s; put it in double quotes", i+1, describe(e))
			continue
		}
		if msg := checkString(s, c); msg != "" {
			d.failElem(at, i, "%s", msg)
			continue
		}
		out = append(out, s)
	}
	if len(out) < len(arr) {
		return false
	}
	*dst = out
	return true
}

func checkString(s string, c check) string {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Sprintf("%q contains a NUL character; remove it", s)
	}
	if c == nil {
		return ""
	}
	return c(s)
}

func (d *decoder) boolean(at keyPath, v any, dst *bool) bool {
	b, ok := v.(bool)
	if !ok {
		d.wrongType(at, v, "a boolean", "write true or false, without quotes")
		return false
	}
	*dst = b
	return true
}

// integer stores an integer in [lo, hi] into dst.
func integer[I int | int64](d *decoder, at keyPath, v any, dst *I, lo, hi int64) bool {
	n, ok := v.(int64)
	if !ok {
		d.wrongType(at, v, "an integer", "write a whole number without quotes")
		return false
	}
	if n < lo || n > hi {
		want := fmt.Sprintf("%d to %d", lo, hi)
		if hi >= math.MaxInt {
			want = fmt.Sprintf("at least %d", lo)
		}
		d.fail(at, "%d is out of range; use %s", n, want)
		return false
	}
	*dst = I(n)
	return true
}

func (d *decoder) duration(at keyPath, v any, dst *time.Duration) bool {
	s, ok := v.(string)
	if !ok {
		example := `"60s"`
		if n, isInt := v.(int64); isInt {
			example = strconv.Quote(strconv.FormatInt(n, 10) + "s")
		}
		d.wrongType(at, v, `a duration string such as "60s" or "1m30s"`, "write it quoted with a unit, e.g. "+example)
		return false
	}
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.fail(at, `invalid duration %q; use Go duration syntax such as "60s", "1m30s" or "500ms"`, s)
		return false
	case dur <= 0:
		d.fail(at, `duration %q is not positive; use a value greater than 0 such as "60s"`, s)
		return false
	}
	*dst = dur
	return true
}

func (d *decoder) rateLimit(at keyPath, v any, dst *RateLimit) bool {
	s, ok := v.(string)
	if !ok {
		d.wrongType(at, v, `a rate limit string such as "1000/10s" or "off"`, "put it in double quotes")
		return false
	}
	r, err := ParseRateLimit(s)
	if err != nil {
		d.fail(at, `%v; write LINES/DURATION such as "1000/10s", or "off"`, err)
		return false
	}
	*dst = r
	return true
}

func (d *decoder) env(at keyPath, v any, dst *map[string]string) bool {
	t, ok := v.(map[string]any)
	if !ok {
		d.wrongType(at, v, "a table of strings", `write env = { NAME = "value" }`)
		return false
	}
	env := make(map[string]string, len(t))
	good := true
	for _, k := range slices.Sorted(maps.Keys(t)) {
		kat := at.child(k)
		switch {
		case !envName.MatchString(k):
			d.fail(kat, `%q is not a valid environment variable name; use letters, digits and "_", not starting with a digit`, k)
			good = false
		case slices.Contains(ReservedEnv(), k):
			d.fail(kat, "%s is reserved: mcpgated receives it from systemd for itself (socket activation, sd_notify, watchdog, journal) and never passes it to backends; remove it", k)
			good = false
		default:
			var s string
			if d.str(kat, t[k], &s, checkCredentialRefs) {
				env[k] = s
			} else {
				good = false
			}
		}
	}
	if good {
		*dst = env
	}
	return good
}

// backend decodes the table v of backends.NAME; it returns nil if v is not a
// table. g must be the final gateway, whose values backends inherit.
func (d *decoder) backend(at keyPath, v any, g *Gateway) *Backend {
	t, ok := d.table(at, v, "a table", "write a [backends.NAME] header with the backend's keys below it")
	if !ok {
		return nil
	}
	name := at[len(at)-1]
	b := defaultBackend(name, g)
	b.File = d.f.path
	b.Line = d.f.lookup(at).line
	if !backendName.MatchString(name) {
		d.fail(at, `invalid backend name %q; use 1 to 64 letters, digits, "_" or "-"`, name)
	}
	refused := decodeTable(d, at, t, backendFields(), b)
	if !d.checkTransport(at, t, b, refused) {
		return b
	}
	if _, ok := t["command"]; ok {
		b.CommandLine = d.f.lookup(at.child("command")).line
	}
	_, hasCommand := t["command"]
	_, hasURL := t["url"]
	if !hasCommand && !hasURL && b.Enabled && !refused["enabled"] && b.Transport != "cli" {
		d.fail(at, `enabled backend has no command; set command = "/path/to/server", or enabled = false`)
	}
	d.checkRemote(at, t, b)
	if !refused["restart_backoff_initial"] && !refused["restart_backoff_max"] &&
		b.RestartBackoffInitial > b.RestartBackoffMax {
		blame := at.child("restart_backoff_initial")
		if _, set := t["restart_backoff_initial"]; !set {
			blame = at.child("restart_backoff_max")
		}
		d.fail(blame, "restart_backoff_initial (%v) is greater than restart_backoff_max (%v); lower the first or raise the second",
			b.RestartBackoffInitial, b.RestartBackoffMax)
	}
	d.checkLifecycle(at, t, refused, b)
	d.checkResources(at, t, b)
	d.checkProtocol(at, t, b)
	return b
}

func checkListen(s string) string {
	const examples = `write "127.0.0.1:7431", "[::1]:7431" or "unix:/run/mcpgate/mcpgate.sock"`
	if p, ok := strings.CutPrefix(s, "unix:"); ok {
		if !path.IsAbs(p) {
			return fmt.Sprintf("%q is not an absolute socket path; %s", s, examples)
		}
		return ""
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is neither host:port nor unix:/absolute/path; %s", s, examples)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Sprintf("%q has an invalid port %q; use a number from 0 to 65535", s, port)
	}
	return ""
}

func checkEndpoint(s string) string {
	if !strings.HasPrefix(s, "/") {
		return fmt.Sprintf(`%q does not start with "/"; write a path such as "/mcp"`, s)
	}
	return ""
}

func checkNotEmpty(s string) string {
	if s == "" {
		return "empty entry; remove it"
	}
	return ""
}

func checkCommand(s string) string {
	if s == "" {
		return `empty command; set the server's executable, such as "/usr/bin/my-server" or "npx"`
	}
	return ""
}

func checkToolPrefix(s string) string {
	switch {
	case !toolPrefix.MatchString(s):
		return fmt.Sprintf(`%q has characters other than letters, digits, "_", "." and "-"; use only those`, s)
	case len(s) > 64:
		return fmt.Sprintf("%q is %d characters long; use at most 64", s, len(s))
	}
	return ""
}

func checkRoot(s string) string {
	u, err := url.Parse(s)
	if err != nil || !strings.HasPrefix(s, "file://") || u.Host != "" || !path.IsAbs(u.Path) {
		return fmt.Sprintf(`%q is not an absolute file:// URI; write one such as "file:///srv/project"`, s)
	}
	return ""
}

// oneOf accepts exactly the given values.
func oneOf(values ...string) check {
	return func(s string) string {
		if slices.Contains(values, s) {
			return ""
		}
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = strconv.Quote(v)
		}
		return fmt.Sprintf("%q is not a valid value; use one of %s", s, strings.Join(quoted, ", "))
	}
}
