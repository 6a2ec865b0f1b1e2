package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// errorLines loads path and returns its error's lines with the temporary
// directory stripped, so that tests can state exact messages.
func errorLines(t *testing.T, path string) []string {
	t.Helper()
	c, err := Load(path)
	if err == nil {
		t.Fatalf("Load succeeded, want an error; got %+v", c)
	}
	if c != nil {
		t.Errorf("Load returned a config along with error %v", err)
	}
	checkErrorTree(t, err)
	text := strings.ReplaceAll(err.Error(), filepath.Dir(path)+string(filepath.Separator), "")
	return strings.Split(text, "\n")
}

// checkErrorTree fails unless err is an *Error or a join of them, each with
// a file and a line.
func checkErrorTree(t *testing.T, err error) {
	t.Helper()
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			checkErrorTree(t, e)
		}
		return
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %v is a %T, want *config.Error", err, err)
	}
	if e.File == "" || e.Line < 1 || e.Msg == "" {
		t.Errorf("error %#v lacks file, line or message", e)
	}
}

func TestLoadErrors(t *testing.T) {
	const gh = "[backends.gh]\ncommand = \"gh\"\n" // lines 1-2
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		// Syntax.
		{"syntax", map[string]string{"mcpgate.toml": "[gateway]\nendpoint = \n"}, []string{
			`mcpgate.toml:2:12: invalid TOML: unexpected character U+000A at start of value; fix it (syntax: https://toml.io/en/v1.0.0)`,
		}},
		{"toml duplicate key", map[string]string{"mcpgate.toml": "[gateway]\nbus = \"none\"\nbus = \"none\"\n"}, []string{
			`mcpgate.toml:3:1: invalid TOML: key bus is already defined; fix it (syntax: https://toml.io/en/v1.0.0)`,
		}},

		{"metrics_listen not an address", map[string]string{"mcpgate.toml": "[gateway]\nmetrics_listen = \"metrics\"\n"}, []string{
			`mcpgate.toml:2:1: gateway.metrics_listen: "metrics" is neither host:port nor unix:/absolute/path; write "127.0.0.1:7431", "[::1]:7431" or "unix:/run/mcpgate/mcpgate.sock", or "fd:metrics" for the socket-activated fd named metrics`,
		}},
		{"health_interval zero", map[string]string{"mcpgate.toml": "[gateway]\nhealth_interval = \"0s\"\n"}, []string{
			`mcpgate.toml:2:1: gateway.health_interval: duration "0s" is not positive; write "off" to turn this off, or a value such as "30s"`,
		}},
		{"integrity values", map[string]string{"mcpgate.toml": "[gateway]\nintegrity = \"strict\"\nstate_directory = \"state\"\n" + gh + "max_description_bytes = 10\n"}, []string{
			`mcpgate.toml:2:1: gateway.integrity: "strict" is not a valid value; use one of "pin", "warn", "off"`,
			`mcpgate.toml:3:1: gateway.state_directory: "state" is not an absolute path; write one such as "/var/lib/mcpgate", or "" for systemd's StateDirectory=`,
			`mcpgate.toml:6:1: backends.gh.max_description_bytes: 10 is out of range; use 64 to 2147483647`,
		}},
		{"protocol keys", map[string]string{"mcpgate.toml": "[gateway]\nfirst_list_wait = \"5m\"\n" + gh +
			"era = \"modern\"\nclient_capabilities = [\"sampling\", \"tools\"]\nlist_ttl = \"500us\"\n" +
			"[backends.quiet]\ncommand = \"q\"\nrelay_client_requests = false\nclient_capabilities = [\"sampling\", \"roots\"]\n" +
			"[backends.cli]\ntransport = \"cli\"\nera = \"legacy\"\n[backends.cli.tools.t]\ncommand = [\"true\"]\n"}, []string{
			`mcpgate.toml:2:1: gateway.first_list_wait: 5m0s is longer than a minute: a client's first list would wait that long for a slow backend; use a few seconds, or "off"`,
			`mcpgate.toml:5:1: backends.gh.era: "modern" is not a valid value; use one of "auto", "legacy"`,
			`mcpgate.toml:6:36: backends.gh.client_capabilities: "tools" is not a valid value; use one of "sampling", "elicitation", "roots"`,
			`mcpgate.toml:7:1: backends.gh.list_ttl: 500µs is below a millisecond, the unit of ttlMs; use at least "1ms", or "0s"`,
			`mcpgate.toml:11:1: backends.quiet.client_capabilities: sampling and roots cannot be declared with relay_client_requests = false, which relays no request of the backend to a client; remove sampling and roots, or relay_client_requests`,
			`mcpgate.toml:14:1: backends.cli.era: era is for an MCP server; a cli backend (transport = "cli") runs programs; remove it`,
		}},
		// Fallbacks.
		{"fallback cycle", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\nfallback = [\"b\"]\n[backends.b]\ncommand = \"x\"\nfallback = [\"a\"]\n"}, []string{
			`mcpgate.toml:6:1: backends.b.fallback: fallback cycle "a" → "b" → "a"; a call could go round it forever, remove one of them`,
		}},
		{"fallback to itself", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\nfallback = [\"a\"]\n"}, []string{
			`mcpgate.toml:3:1: backends.a.fallback: backend "a" names itself as its fallback; remove "a"`,
		}},
		{"fallback to an unknown backend", map[string]string{"mcpgate.toml": "[backends.alpha]\ncommand = \"x\"\nfallback = [\"beta\"]\n[backends.betta]\ncommand = \"x\"\n"}, []string{
			`mcpgate.toml:3:1: backends.alpha.fallback: fallback "beta" is not a configured backend (did you mean "betta"?)`,
		}},

		// Unknown keys.
		{"unknown backend key with suggestion", map[string]string{"mcpgate.toml": gh + "timeot = \"5s\"\n"}, []string{
			`mcpgate.toml:3:1: backends.gh.timeot: unknown key (did you mean "timeout"?)`,
		}},
		{"unknown gateway key, other spelling", map[string]string{"mcpgate.toml": "[gateway]\nRequest-Timeout = \"5s\"\n"}, []string{
			`mcpgate.toml:2:1: gateway.Request-Timeout: unknown key (did you mean "request_timeout"?)`,
		}},
		{"unknown gateway key without suggestion", map[string]string{"mcpgate.toml": "[gateway]\ncolour = 1\n"}, []string{
			`mcpgate.toml:2:1: gateway.colour: unknown key; valid keys here: listen, endpoint, request_timeout, shutdown_grace_period, drain_timeout, max_message_bytes, page_size, max_stream_events, allowed_origins, allowed_hosts, bus, log_target, log_level, log_rate_limit, composite_prefix, metrics_listen, status_resources, server_card, max_sessions, session_idle_timeout, resume_window, max_concurrent_requests, max_batch_size, http_read_timeout, http_idle_timeout, sse_keepalive_interval, max_subscriptions, max_input_required_calls, max_input_required_calls_per_client, max_tasks, max_tasks_per_client, max_task_ttl, auth, audit, credentials_directory, health_interval, health_timeout, failure_threshold, recovery_multiplier, start_wait, catalog_grace, catalog_refresh, idle_exit, first_list_wait, runner, integrity, max_description_bytes, max_schema_bytes, state_directory`,
		}},
		{"unknown top-level key", map[string]string{"mcpgate.toml": "[gatway]\nbus = \"none\"\ncommand = \"x\"\n"}, []string{
			`mcpgate.toml:1:2: gatway: unknown key (did you mean "gateway"?)`,
		}},
		{"unknown top-level key without suggestion", map[string]string{"mcpgate.toml": "command = \"x\"\n"}, []string{
			`mcpgate.toml:1:1: command: unknown key; settings belong in [gateway], [backends.NAME], [clients.NAME], [composites.NAME], [profiles.NAME], [oauth] or [telemetry]`,
		}},
		{"unknown key in inline table", map[string]string{"mcpgate.toml": "[backends]\ngh = { command = \"gh\", arg = [] }\n"}, []string{
			`mcpgate.toml:2:24: backends.gh.arg: unknown key (did you mean "args"?)`,
		}},

		// Wrong types.
		{"wrong types", map[string]string{"mcpgate.toml": `[gateway]
endpoint = 5
page_size = "100"
max_message_bytes = 1.5
listen = "127.0.0.1:1"
allowed_hosts = ["a", 2]
log_rate_limit = 1000
[backends.gh]
command = ["gh"]
enabled = "yes"
env = ["A=1"]
args = [{ x = 1 }]
cwd = 1979-05-27
`}, []string{
			`mcpgate.toml:2:1: gateway.endpoint: expected a string, got integer 5; put the value in double quotes`,
			`mcpgate.toml:3:1: gateway.page_size: expected an integer, got string "100"; write a whole number without quotes`,
			`mcpgate.toml:4:1: gateway.max_message_bytes: expected an integer, got float 1.5; write a whole number without quotes`,
			`mcpgate.toml:5:1: gateway.listen: expected an array of strings, got string "127.0.0.1:1"; write ["…", "…"]`,
			`mcpgate.toml:6:23: gateway.allowed_hosts: entry 2: expected a string, got integer 2; put it in double quotes`,
			`mcpgate.toml:7:1: gateway.log_rate_limit: expected a rate limit string such as "1000/10s" or "off", got integer 1000; put it in double quotes`,
			`mcpgate.toml:9:1: backends.gh.command: expected a string, got an array; put the value in double quotes`,
			`mcpgate.toml:10:1: backends.gh.enabled: expected a boolean, got string "yes"; write true or false, without quotes`,
			`mcpgate.toml:11:1: backends.gh.env: expected a table of strings, got an array; write env = { NAME = "value" }`,
			`mcpgate.toml:12:9: backends.gh.args: entry 1: expected a string, got a table; put it in double quotes`,
			`mcpgate.toml:13:1: backends.gh.cwd: expected a string, got a date/time; put the value in double quotes`,
		}},
		{"gateway not a table", map[string]string{"mcpgate.toml": "gateway = \"x\"\n"}, []string{
			`mcpgate.toml:1:1: gateway: expected a table, got string "x"; write a [gateway] header with its keys below it`,
		}},
		{"backends as array of tables", map[string]string{"mcpgate.toml": "[[backends]]\nname = \"gh\"\n"}, []string{
			`mcpgate.toml:1:3: backends: expected a table of backends, got an array; write a [backends.NAME] header for each backend`,
		}},
		{"backend not a table", map[string]string{"mcpgate.toml": "[backends]\ngh = \"gh\"\n"}, []string{
			`mcpgate.toml:2:1: backends.gh: expected a table, got string "gh"; write a [backends.NAME] header with the backend's keys below it`,
		}},

		// Durations.
		{"durations", map[string]string{"mcpgate.toml": `[gateway]
request_timeout = 60
shutdown_grace_period = "5 sec"
drain_timeout = "0s"
[backends.gh]
command = "gh"
timeout = "-1s"
restart_window = "1d"
restart_backoff_initial = ""
restart_backoff_max = true
`}, []string{
			`mcpgate.toml:2:1: gateway.request_timeout: expected a duration string such as "60s" or "1m30s", got integer 60; write it quoted with a unit, e.g. "60s"`,
			`mcpgate.toml:3:1: gateway.shutdown_grace_period: invalid duration "5 sec"; use Go duration syntax such as "60s", "1m30s" or "500ms"`,
			`mcpgate.toml:4:1: gateway.drain_timeout: duration "0s" is not positive; use a value greater than 0 such as "60s"`,
			`mcpgate.toml:7:1: backends.gh.timeout: duration "-1s" is not positive; use a value greater than 0 such as "60s"`,
			`mcpgate.toml:8:1: backends.gh.restart_window: invalid duration "1d"; use Go duration syntax such as "60s", "1m30s" or "500ms"`,
			`mcpgate.toml:9:1: backends.gh.restart_backoff_initial: invalid duration ""; use Go duration syntax such as "60s", "1m30s" or "500ms"`,
			`mcpgate.toml:10:1: backends.gh.restart_backoff_max: expected a duration string such as "60s" or "1m30s", got boolean true; write it quoted with a unit, e.g. "60s"`,
		}},
		{"backoff initial above max", map[string]string{"mcpgate.toml": gh + "restart_backoff_max = \"1s\"\nrestart_backoff_initial = \"2s\"\n"}, []string{
			`mcpgate.toml:4:1: backends.gh.restart_backoff_initial: restart_backoff_initial (2s) is greater than restart_backoff_max (1s); lower the first or raise the second`,
		}},
		{"backoff initial above default max", map[string]string{"mcpgate.toml": gh + "restart_backoff_initial = \"2m\"\n"}, []string{
			`mcpgate.toml:3:1: backends.gh.restart_backoff_initial: restart_backoff_initial (2m0s) is greater than restart_backoff_max (1m0s); lower the first or raise the second`,
		}},
		{"backoff max below default initial", map[string]string{"mcpgate.toml": gh + "restart_backoff_max = \"500ms\"\n"}, []string{
			`mcpgate.toml:3:1: backends.gh.restart_backoff_max: restart_backoff_initial (1s) is greater than restart_backoff_max (500ms); lower the first or raise the second`,
		}},
		{"pool min idle above max", map[string]string{"mcpgate.toml": gh + "instance = \"session\"\npool_min_idle = 5\npool_max = 2\n"}, []string{
			`mcpgate.toml:4:1: backends.gh.pool_min_idle: pool_min_idle (5) is greater than pool_max (2); lower the first or raise the second`,
		}},
		{"on-demand pool", map[string]string{"mcpgate.toml": gh + "instance = \"session\"\nstart = \"on-demand\"\n"}, []string{
			`mcpgate.toml:4:1: backends.gh.start: start = "on-demand" does not combine with instance = "session"; use pool_min_idle = 0 to start no instance before a session needs one`,
		}},
		{"idle_stop on a pool", map[string]string{"mcpgate.toml": gh + "instance = \"session\"\nidle_stop = \"1m\"\n"}, []string{
			`mcpgate.toml:4:1: backends.gh.idle_stop: idle_stop does not apply to instance = "session": a session's instance stops when the session ends; remove idle_stop`,
		}},
		{"bad start", map[string]string{"mcpgate.toml": gh + "start = \"lazy\"\n"}, []string{
			`mcpgate.toml:3:1: backends.gh.start: "lazy" is not a valid value; use one of "eager", "on-demand"`,
		}},

		// Rate limits.
		{"rate limits", map[string]string{"mcpgate.toml": "[gateway]\nlog_rate_limit = \"1000\"\n" + gh + "log_rate_limit = \"0/1s\"\n"}, []string{
			`mcpgate.toml:2:1: gateway.log_rate_limit: invalid rate limit "1000": no "/" between lines and duration; write LINES/DURATION such as "1000/10s", or "off"`,
			`mcpgate.toml:5:1: backends.gh.log_rate_limit: invalid rate limit "0/1s": 0 lines is ambiguous ("off" means no limit); write LINES/DURATION such as "1000/10s", or "off"`,
		}},

		// Integers.
		{"integer ranges", map[string]string{"mcpgate.toml": "[gateway]\nmax_message_bytes = 4095\npage_size = 0\n[backends.gh]\ncommand = \"gh\"\nmax_restarts = -1\n"}, []string{
			`mcpgate.toml:2:1: gateway.max_message_bytes: 4095 is out of range; use at least 4096`,
			`mcpgate.toml:3:1: gateway.page_size: 0 is out of range; use 1 to 10000`,
			`mcpgate.toml:6:1: backends.gh.max_restarts: -1 is out of range; use at least 0`,
		}},
		{"page size too big", map[string]string{"mcpgate.toml": "[gateway]\npage_size = 10001\n"}, []string{
			`mcpgate.toml:2:1: gateway.page_size: 10001 is out of range; use 1 to 10000`,
		}},

		// Enumerations and strings.
		{"enums", map[string]string{"mcpgate.toml": "[gateway]\nbus = \"System\"\nlog_target = \"syslog\"\nlog_level = \"warning\"\n"}, []string{
			`mcpgate.toml:2:1: gateway.bus: "System" is not a valid value; use one of "system", "session", "none"`,
			`mcpgate.toml:3:1: gateway.log_target: "syslog" is not a valid value; use one of "auto", "journal", "stderr"`,
			`mcpgate.toml:4:1: gateway.log_level: "warning" is not a valid value; use one of "debug", "info", "warn", "error"`,
		}},
		{"endpoint", map[string]string{"mcpgate.toml": "[gateway]\nendpoint = \"mcp\"\n"}, []string{
			`mcpgate.toml:2:1: gateway.endpoint: "mcp" does not start with "/"; write a path such as "/mcp"`,
		}},
		{"listen entries", map[string]string{"mcpgate.toml": `[gateway]
listen = [
  "127.0.0.1:7431",
  "localhost",
  "127.0.0.1:http",
  "[::1]:65536",
  "unix:run/x.sock",
  "unix:",
]
`}, []string{
			`mcpgate.toml:4:3: gateway.listen: "localhost" is neither host:port nor unix:/absolute/path; write "127.0.0.1:7431", "[::1]:7431" or "unix:/run/mcpgate/mcpgate.sock"`,
			`mcpgate.toml:5:3: gateway.listen: "127.0.0.1:http" has an invalid port "http"; use a number from 0 to 65535`,
			`mcpgate.toml:6:3: gateway.listen: "[::1]:65536" has an invalid port "65536"; use a number from 0 to 65535`,
			`mcpgate.toml:7:3: gateway.listen: "unix:run/x.sock" is not an absolute socket path; write "127.0.0.1:7431", "[::1]:7431" or "unix:/run/mcpgate/mcpgate.sock"`,
			`mcpgate.toml:8:3: gateway.listen: "unix:" is not an absolute socket path; write "127.0.0.1:7431", "[::1]:7431" or "unix:/run/mcpgate/mcpgate.sock"`,
		}},
		{"empty allowed origin", map[string]string{"mcpgate.toml": "[gateway]\nallowed_origins = [\"https://a\", \"\"]\n"}, []string{
			`mcpgate.toml:2:33: gateway.allowed_origins: empty entry; remove it`,
		}},
		{"NUL in a string", map[string]string{"mcpgate.toml": gh + "args = [\"a\\u0000b\"]\n"}, []string{
			`mcpgate.toml:3:9: backends.gh.args: "a\x00b" contains a NUL character; remove it`,
		}},

		// Backends.
		{"backend names", map[string]string{"mcpgate.toml": "[backends.\"git hub\"]\ncommand = \"gh\"\n[backends.\"\"]\ncommand = \"x\"\n[backends." + strings.Repeat("n", 65) + "]\ncommand = \"x\"\n"}, []string{
			`mcpgate.toml:1:11: backends."git hub": invalid backend name "git hub"; use 1 to 64 letters, digits, "_" or "-"`,
			`mcpgate.toml:3:11: backends."": invalid backend name ""; use 1 to 64 letters, digits, "_" or "-"`,
			`mcpgate.toml:5:11: backends.` + strings.Repeat("n", 65) + `: invalid backend name "` + strings.Repeat("n", 65) + `"; use 1 to 64 letters, digits, "_" or "-"`,
		}},
		{"unit of a pool's instance", map[string]string{"mcpgate.toml": "[gateway]\nrunner = \"unit\"\n[backends.fs]\ncommand = \"x\"\ninstance = \"session\"\n[backends.fs-2]\ncommand = \"x\"\n[backends.fs-b]\ncommand = \"x\"\n[backends.fs-3]\ncommand = \"x\"\nrunner = \"process\"\n"}, []string{
			`mcpgate.toml:6:11: backends.fs-2.runner: backend "fs-2" would run in the unit of instance 2 of backend "fs" (instance = "session"): rename one, or give one runner = "process"`,
		}},
		{"missing command", map[string]string{"mcpgate.toml": "# gh\n[backends.gh]\nargs = []\n"}, []string{
			`mcpgate.toml:2:11: backends.gh: enabled backend has no command; set command = "/path/to/server", or enabled = false`,
		}},
		{"explicitly enabled without command", map[string]string{"mcpgate.toml": "[backends.gh]\nenabled = true\n"}, []string{
			`mcpgate.toml:1:11: backends.gh: enabled backend has no command; set command = "/path/to/server", or enabled = false`,
		}},
		{"empty command", map[string]string{"mcpgate.toml": "[backends.gh]\ncommand = \"\"\n"}, []string{
			`mcpgate.toml:2:1: backends.gh.command: empty command; set the server's executable, such as "/usr/bin/my-server" or "npx"`,
		}},
		{"tool prefixes", map[string]string{"mcpgate.toml": gh + "tool_prefix = \"gh/\"\n[backends.b]\ncommand = \"b\"\ntool_prefix = \"" + strings.Repeat("p", 65) + "\"\n"}, []string{
			`mcpgate.toml:3:1: backends.gh.tool_prefix: "gh/" has characters other than letters, digits, "_", "." and "-"; use only those`,
			`mcpgate.toml:6:1: backends.b.tool_prefix: "` + strings.Repeat("p", 65) + `" is 65 characters long; use at most 64`,
		}},
		{"roots", map[string]string{"mcpgate.toml": gh + `roots = ["file:///ok", "/srv/x", "file://host/srv", "https://x/y", "file:relative", "file://"]` + "\n"}, []string{
			`mcpgate.toml:3:24: backends.gh.roots: "/srv/x" is not an absolute file:// URI; write one such as "file:///srv/project"`,
			`mcpgate.toml:3:34: backends.gh.roots: "file://host/srv" is not an absolute file:// URI; write one such as "file:///srv/project"`,
			`mcpgate.toml:3:53: backends.gh.roots: "https://x/y" is not an absolute file:// URI; write one such as "file:///srv/project"`,
			`mcpgate.toml:3:68: backends.gh.roots: "file:relative" is not an absolute file:// URI; write one such as "file:///srv/project"`,
			`mcpgate.toml:3:85: backends.gh.roots: "file://" is not an absolute file:// URI; write one such as "file:///srv/project"`,
		}},
		{"env", map[string]string{"mcpgate.toml": gh + `[backends.gh.env]
OK = "1"
"2FA" = "x"
"A-B" = "x"
NOTIFY_SOCKET = "/run/x"
LISTEN_FDS = "3"
JOURNAL_STREAM = "x"
N = 1
`}, []string{
			`mcpgate.toml:5:1: backends.gh.env.2FA: "2FA" is not a valid environment variable name; use letters, digits and "_", not starting with a digit`,
			`mcpgate.toml:6:1: backends.gh.env.A-B: "A-B" is not a valid environment variable name; use letters, digits and "_", not starting with a digit`,
			`mcpgate.toml:7:1: backends.gh.env.NOTIFY_SOCKET: NOTIFY_SOCKET is reserved: mcpgated receives it from systemd for itself (socket activation, sd_notify, watchdog, journal) and never passes it to backends; remove it`,
			`mcpgate.toml:8:1: backends.gh.env.LISTEN_FDS: LISTEN_FDS is reserved: mcpgated receives it from systemd for itself (socket activation, sd_notify, watchdog, journal) and never passes it to backends; remove it`,
			`mcpgate.toml:9:1: backends.gh.env.JOURNAL_STREAM: JOURNAL_STREAM is reserved: mcpgated receives it from systemd for itself (socket activation, sd_notify, watchdog, journal) and never passes it to backends; remove it`,
			`mcpgate.toml:10:1: backends.gh.env.N: expected a string, got integer 1; put the value in double quotes`,
		}},

		// Duplicates.
		{"backend twice in one file", map[string]string{"mcpgate.toml": gh + "\n[backends.gh]\nargs = []\n"}, []string{
			`mcpgate.toml:4:11: backends.gh: backend defined twice: first at mcpgate.toml:1, again at mcpgate.toml:4; merge them into one [backends.gh] table`,
		}},
		{"backend twice in one file, inline", map[string]string{"mcpgate.toml": "[backends]\ngh = { command = \"a\" }\ngh = { command = \"b\" }\n"}, []string{
			`mcpgate.toml:3:1: backends.gh: backend defined twice: first at mcpgate.toml:2, again at mcpgate.toml:3; merge them into one [backends.gh] table`,
		}},
		{"backend in main and drop-in", map[string]string{
			"mcpgate.toml":       "[gateway]\n" + gh,
			"conf.d/10-gh.toml":  "# override\n[backends.gh]\ncommand = \"other\"\n",
			"conf.d/20-gh.toml":  "[backends]\ngh.command = \"third\"\n",
			"conf.d/30-ok.toml":  "[backends.ok]\ncommand = \"ok\"\n",
			"conf.d/00-bad.toml": "[gateway]\nbus = 1\n",
		}, []string{
			`conf.d/00-bad.toml:2:1: gateway.bus: expected a string, got integer 1; put the value in double quotes`,
			`conf.d/10-gh.toml:2:11: backends.gh: backend defined twice: first at mcpgate.toml:2, again at conf.d/10-gh.toml:2; keep one definition (a drop-in can add backends, not change one defined in another file)`,
			`conf.d/20-gh.toml:2:1: backends.gh: backend defined twice: first at mcpgate.toml:2, again at conf.d/20-gh.toml:2; keep one definition (a drop-in can add backends, not change one defined in another file)`,
		}},

		// Everything at once: all problems, in file and line order.
		{"many errors across files", map[string]string{
			"mcpgate.toml": `[gateway]
endpoint = "x"
page_size = "big"

[backends.gh]
timeot = "5s"
env = { LISTEN_PID = "1" }
`,
			"conf.d/a.toml": "[gateway]\nbus = \"dbus\"\n[backends.gh]\ncommand = \"x\"\n",
			"conf.d/b.toml": "[gateway\n",
		}, []string{
			`mcpgate.toml:2:1: gateway.endpoint: "x" does not start with "/"; write a path such as "/mcp"`,
			`mcpgate.toml:3:1: gateway.page_size: expected an integer, got string "big"; write a whole number without quotes`,
			`mcpgate.toml:5:11: backends.gh: enabled backend has no command; set command = "/path/to/server", or enabled = false`,
			`mcpgate.toml:6:1: backends.gh.timeot: unknown key (did you mean "timeout"?)`,
			`mcpgate.toml:7:9: backends.gh.env.LISTEN_PID: LISTEN_PID is reserved: mcpgated receives it from systemd for itself (socket activation, sd_notify, watchdog, journal) and never passes it to backends; remove it`,
			`conf.d/a.toml:2:1: gateway.bus: "dbus" is not a valid value; use one of "system", "session", "none"`,
			`conf.d/a.toml:3:11: backends.gh: backend defined twice: first at mcpgate.toml:5, again at conf.d/a.toml:3; keep one definition (a drop-in can add backends, not change one defined in another file)`,
			`conf.d/b.toml:1:9: invalid TOML: expected ']' to close table name; fix it (syntax: https://toml.io/en/v1.0.0)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorLines(t, testutil.WriteConfigFiles(t, tt.files))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "\n[backends.github]\ncommand = \"gh\"\n  timeot = \"5s\"\n"})
	_, err := Load(path)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Load error %v is not a *config.Error", err)
	}
	want := &Error{File: path, Line: 4, Col: 3, Key: "backends.github.timeot", Msg: `unknown key (did you mean "timeout"?)`}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("error = %#v, want %#v", e, want)
	}
	if got, wantText := e.Error(), path+`:4:3: backends.github.timeot: unknown key (did you mean "timeout"?)`; got != wantText {
		t.Errorf("Error() = %s, want %s", got, wantText)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{File: "f.toml", Line: 3, Col: 7, Key: "gateway.bus", Msg: "bad; fix"}, "f.toml:3:7: gateway.bus: bad; fix"},
		{Error{File: "f.toml", Line: 3, Key: "gateway.bus", Msg: "bad"}, "f.toml:3: gateway.bus: bad"},
		{Error{File: "f.toml", Line: 3, Col: 1, Msg: "bad"}, "f.toml:3:1: bad"},
		{Error{File: "f.toml", Msg: "cannot read"}, "f.toml: cannot read"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Run("missing main file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mcpgate.toml")
		_, err := Load(path)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(missing) error = %v, want one wrapping fs.ErrNotExist", err)
		}
		want := path + ": cannot read: no such file or directory; check that the file exists and is readable"
		if err == nil || err.Error() != want {
			t.Errorf("Load(missing) error = %v, want %s", err, want)
		}
	})
	t.Run("main file is a directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mcpgate.toml")
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		want := path + ": cannot read: is a directory; check that the file exists and is readable"
		if err == nil || err.Error() != want {
			t.Errorf("Load(dir) error = %v, want %s", err, want)
		}
	})
	t.Run("conf.d is a file", func(t *testing.T) {
		path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "", "conf.d": "x"})
		_, err := Load(path)
		dir := filepath.Join(filepath.Dir(path), "conf.d")
		want := dir + ": cannot read drop-in directory: not a directory; make it a readable directory or remove it"
		if err == nil || err.Error() != want {
			t.Errorf("Load error = %v, want %s", err, want)
		}
	})
	t.Run("dangling drop-in symlink", func(t *testing.T) {
		path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "", "conf.d/.keep": ""})
		link := filepath.Join(filepath.Dir(path), "conf.d", "10-gone.toml")
		if err := os.Symlink("/nonexistent/gone.toml", link); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		want := link + ": cannot read: no such file or directory; check that the file exists and is readable"
		if err == nil || err.Error() != want {
			t.Errorf("Load error = %v, want %s", err, want)
		}
	})
}

// The bounded names match 1 to max bytes of their class, as the {1,max}
// patterns they replaced did.
func TestBoundedNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    boundedName
		max  int
		ok   string // a byte of the class beyond letters and digits
		bad  string
	}{
		{"backend", backendName, 64, "-", "."},
		{"client", clientName, 64, "_", "@"},
		{"tool", toolName, 64, ".", "/"},
		{"composite", compositeName, 64, ".", " "},
		{"credential", credentialName, 255, "@", "/"},
	} {
		for s, want := range map[string]bool{
			"":                                  false,
			"a":                                 true,
			tc.ok:                               true,
			strings.Repeat("a", tc.max):         true,
			strings.Repeat("a", tc.max+1):       false,
			"a" + tc.bad + "b":                  false,
			strings.Repeat("Z9", tc.max/2):      true,
			"a\n":                               false,
			strings.Repeat("a", tc.max-1) + "é": false,
		} {
			if got := tc.n.MatchString(s); got != want {
				t.Errorf("%s name %q (%d bytes): match %v, want %v", tc.name, s, len(s), got, want)
			}
		}
	}
}
