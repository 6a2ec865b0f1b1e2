package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// wantGateway spells out the documented defaults independently of
// defaultGateway, so that a changed default fails a test.
func wantGateway() Gateway {
	return Gateway{
		Runner:              RunnerProcess,
		Listen:              []string{"127.0.0.1:7431", "unix:/run/mcpgate/mcpgate.sock"},
		Endpoint:            "/mcp",
		RequestTimeout:      60 * time.Second,
		ShutdownGracePeriod: 5 * time.Second,
		DrainTimeout:        10 * time.Second,
		MaxMessageBytes:     16 * 1024 * 1024,
		PageSize:            100,
		MaxStreamEvents:     512,
		Bus:                 "system",
		LogTarget:           "auto",
		ServerCard:          "identity",
		LogLevel:            "info",
		LogRateLimit:        RateLimit{Burst: 1000, Interval: 10 * time.Second},
		CompositePrefix:     "composite__",
		Access:              Access{Auth: "required", Audit: "calls"},
		Health:              wantHealth(),
		Integrity:           Integrity{Policy: "off", MaxDescriptionBytes: 8192, MaxSchemaBytes: 65536},
		FirstListWait:       2 * time.Second,
		Limits: Limits{
			MaxSessions:           1000,
			SessionIdleTimeout:    time.Hour,
			ResumeWindow:          5 * time.Second,
			MaxConcurrentRequests: 64,
			MaxBatchSize:          32,
			HTTPReadTimeout:       time.Minute,
			HTTPIdleTimeout:       2 * time.Minute,
			SSEKeepAliveInterval:  25 * time.Second,
			MaxSubscriptions:      1000,

			MaxInputRequiredCalls:          1000,
			MaxInputRequiredCallsPerClient: 100,
			MaxTasks:                       1000,
			MaxTasksPerClient:              100,
			MaxTaskTTL:                     24 * time.Hour,
		},
	}
}

// wantHealth spells out the documented health defaults.
func wantHealth() Health {
	return Health{
		HealthInterval: 30 * time.Second, HealthTimeout: 5 * time.Second,
		FailureThreshold: 3, RecoveryMultiplier: 3,
		StartWait: 10 * time.Second, CatalogGrace: 30 * time.Second,
	}
}

// wantBackend is backend "gh" as defined by backendHeader, with every
// default spelled out.
func wantBackend(file string) *Backend {
	return &Backend{
		Name:                  "gh",
		File:                  file,
		Line:                  1,
		CommandLine:           2,
		Command:               "/usr/bin/gh-mcp",
		Enabled:               true,
		Timeout:               60 * time.Second,
		ToolPrefix:            "gh__",
		MaxRestarts:           5,
		RestartWindow:         60 * time.Second,
		RestartBackoffInitial: time.Second,
		RestartBackoffMax:     60 * time.Second,
		LogRateLimit:          RateLimit{Burst: 1000, Interval: 10 * time.Second},
		RelayClientRequests:   true,
		ClientRequestTimeout:  5 * time.Minute,
		Transport:             "stdio",
		PrerequisiteTimeout:   60 * time.Second,
		Health:                wantHealth(),
		Calls:                 Calls{QueueTimeout: 30 * time.Second},
		Lifecycle:             defaultLifecycle(),
		Runner:                RunnerProcess,
		Integrity:             Integrity{Policy: "off", MaxDescriptionBytes: 8192, MaxSchemaBytes: 65536},
		Protocol:              Protocol{Era: EraAuto},
	}
}

const backendHeader = "[backends.gh]\ncommand = \"/usr/bin/gh-mcp\"\n"

func TestDefault(t *testing.T) {
	c := Default()
	if !reflect.DeepEqual(c.Gateway, wantGateway()) {
		t.Errorf("Default().Gateway = %+v, want %+v", c.Gateway, wantGateway())
	}
	if c.Backends == nil || len(c.Backends) != 0 {
		t.Errorf("Default().Backends = %v, want empty non-nil map", c.Backends)
	}
	// Each call returns a fresh value.
	c.Gateway.Listen[0] = "changed"
	if Default().Gateway.Listen[0] == "changed" {
		t.Error("Default shares its Listen slice between calls")
	}
}

func TestLoadEmptyFileIsDefault(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "# nothing set\n"})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Files = []string{path}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load(empty) = %+v, want %+v", c, want)
	}
}

func TestGatewayKeys(t *testing.T) {
	tests := []struct {
		toml string
		want func(*Gateway)
	}{
		{`listen = ["0.0.0.0:80", "[::1]:0", ":8080", "localhost:65535", "unix:/tmp/x.sock"]`, func(g *Gateway) {
			g.Listen = []string{"0.0.0.0:80", "[::1]:0", ":8080", "localhost:65535", "unix:/tmp/x.sock"}
		}},
		{`listen = []`, func(g *Gateway) { g.Listen = []string{} }},
		{`endpoint = "/v1/mcp"`, func(g *Gateway) { g.Endpoint = "/v1/mcp" }},
		{`request_timeout = "1m30s"`, func(g *Gateway) { g.RequestTimeout = 90 * time.Second }},
		{`shutdown_grace_period = "250ms"`, func(g *Gateway) { g.ShutdownGracePeriod = 250 * time.Millisecond }},
		{`drain_timeout = "2h"`, func(g *Gateway) { g.DrainTimeout = 2 * time.Hour }},
		{`max_message_bytes = 4096`, func(g *Gateway) { g.MaxMessageBytes = 4096 }},
		{`max_message_bytes = 1_073_741_824`, func(g *Gateway) { g.MaxMessageBytes = 1 << 30 }},
		{`page_size = 1`, func(g *Gateway) { g.PageSize = 1 }},
		{`page_size = 10000`, func(g *Gateway) { g.PageSize = 10000 }},
		{`max_subscriptions = 1`, func(g *Gateway) { g.MaxSubscriptions = 1 }},
		{`max_input_required_calls = 1`, func(g *Gateway) { g.MaxInputRequiredCalls = 1 }},
		{`max_input_required_calls_per_client = 7`, func(g *Gateway) { g.MaxInputRequiredCallsPerClient = 7 }},
		{`first_list_wait = "500ms"`, func(g *Gateway) { g.FirstListWait = 500 * time.Millisecond }},
		{`first_list_wait = "off"`, func(g *Gateway) { g.FirstListWait = 0 }},
		{`first_list_wait = "0s"`, func(g *Gateway) { g.FirstListWait = 0 }},
		{`max_stream_events = 16`, func(g *Gateway) { g.MaxStreamEvents = 16 }},
		{`allowed_origins = ["https://app.example", "http://10.0.0.2:3000"]`, func(g *Gateway) {
			g.AllowedOrigins = []string{"https://app.example", "http://10.0.0.2:3000"}
		}},
		{`allowed_hosts = ["gate.example", "gate.example:7431"]`, func(g *Gateway) {
			g.AllowedHosts = []string{"gate.example", "gate.example:7431"}
		}},
		{`bus = "system"`, func(g *Gateway) {}},
		{`bus = "session"`, func(g *Gateway) { g.Bus = "session" }},
		{`bus = "none"`, func(g *Gateway) { g.Bus = "none" }},
		{`log_target = "auto"`, func(g *Gateway) {}},
		{`log_target = "journal"`, func(g *Gateway) { g.LogTarget = "journal" }},
		{`log_target = "stderr"`, func(g *Gateway) { g.LogTarget = "stderr" }},
		{`log_level = "debug"`, func(g *Gateway) { g.LogLevel = "debug" }},
		{`log_level = "info"`, func(g *Gateway) {}},
		{`log_level = "warn"`, func(g *Gateway) { g.LogLevel = "warn" }},
		{`log_level = "error"`, func(g *Gateway) { g.LogLevel = "error" }},
		{`log_rate_limit = "off"`, func(g *Gateway) { g.LogRateLimit = RateLimit{} }},
		{`log_rate_limit = "20/1m"`, func(g *Gateway) { g.LogRateLimit = RateLimit{Burst: 20, Interval: time.Minute} }},
		{`max_sessions = 1`, func(g *Gateway) { g.MaxSessions = 1 }},
		{`session_idle_timeout = "10m"`, func(g *Gateway) { g.SessionIdleTimeout = 10 * time.Minute }},
		{`resume_window = "30s"`, func(g *Gateway) { g.ResumeWindow = 30 * time.Second }},
		{`max_concurrent_requests = 16`, func(g *Gateway) { g.MaxConcurrentRequests = 16 }},
		{`max_batch_size = 4`, func(g *Gateway) { g.MaxBatchSize = 4 }},
		{`http_read_timeout = "5m"`, func(g *Gateway) { g.HTTPReadTimeout = 5 * time.Minute }},
		{`http_idle_timeout = "30s"`, func(g *Gateway) { g.HTTPIdleTimeout = 30 * time.Second }},
		{`sse_keepalive_interval = "5s"`, func(g *Gateway) { g.SSEKeepAliveInterval = 5 * time.Second }},
		{`idle_exit = "15m"`, func(g *Gateway) { g.IdleExit = 15 * time.Minute }},
		{`idle_exit = "off"`, func(g *Gateway) {}},
		{`runner = "unit"`, func(g *Gateway) { g.Runner = RunnerUnit }},
	}
	for _, tt := range tests {
		t.Run(tt.toml, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[gateway]\n" + tt.toml + "\n"})
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			want := wantGateway()
			tt.want(&want)
			if !reflect.DeepEqual(c.Gateway, want) {
				t.Errorf("Gateway = %+v\nwant      %+v", c.Gateway, want)
			}
		})
	}
}

func TestBackendKeys(t *testing.T) {
	tests := []struct {
		name    string
		gateway string // [gateway] body, if any
		toml    string // appended after backendHeader
		want    func(*Backend)
	}{
		{"defaults", "", "", func(b *Backend) {}},
		{"args", "", `args = ["-y", "@modelcontextprotocol/server-github"]`, func(b *Backend) {
			b.Args = []string{"-y", "@modelcontextprotocol/server-github"}
		}},
		{"empty args", "", `args = []`, func(b *Backend) { b.Args = []string{} }},
		{"inline env", "", `env = { GITHUB_TOKEN = "t", _X1 = "" }`, func(b *Backend) {
			b.Env = map[string]string{"GITHUB_TOKEN": "t", "_X1": ""}
		}},
		{"env table", "", "[backends.gh.env]\nHOME = \"/var/lib/gh\"", func(b *Backend) {
			b.Env = map[string]string{"HOME": "/var/lib/gh"}
		}},
		{"cwd", "", `cwd = "/srv/gh"`, func(b *Backend) { b.Cwd = "/srv/gh" }},
		{"enabled", "", `enabled = false`, func(b *Backend) { b.Enabled = false }},
		{"required", "", `required = true`, func(b *Backend) { b.Required = true }},
		{"timeout", "", `timeout = "5s"`, func(b *Backend) { b.Timeout = 5 * time.Second }},
		{"max_call_duration", "", `max_call_duration = "1h"`, func(b *Backend) { b.MaxCallDuration = time.Hour }},
		{"max_call_duration off", "", `max_call_duration = "off"`, func(b *Backend) {}},
		{"client_request_timeout", "", `client_request_timeout = "30s"`, func(b *Backend) { b.ClientRequestTimeout = 30 * time.Second }},
		{"tool_prefix", "", `tool_prefix = "gh.v2-"`, func(b *Backend) { b.ToolPrefix = "gh.v2-" }},
		{"tool_prefix empty means unprefixed", "", `tool_prefix = ""`, func(b *Backend) { b.ToolPrefix = "" }},
		{"tool_prefix 64 chars", "", `tool_prefix = "` + strings.Repeat("p", 64) + `"`, func(b *Backend) {
			b.ToolPrefix = strings.Repeat("p", 64)
		}},
		{"max_restarts", "", `max_restarts = 0`, func(b *Backend) { b.MaxRestarts = 0 }},
		{"restart_window", "", `restart_window = "5m"`, func(b *Backend) { b.RestartWindow = 5 * time.Minute }},
		{"restart_backoff_initial", "", `restart_backoff_initial = "100ms"`, func(b *Backend) {
			b.RestartBackoffInitial = 100 * time.Millisecond
		}},
		{"restart_backoff_max", "", `restart_backoff_max = "2s"`, func(b *Backend) { b.RestartBackoffMax = 2 * time.Second }},
		{"backoff initial equal to max", "", "restart_backoff_initial = \"3s\"\nrestart_backoff_max = \"3s\"", func(b *Backend) {
			b.RestartBackoffInitial, b.RestartBackoffMax = 3*time.Second, 3*time.Second
		}},
		{"log_rate_limit", "", `log_rate_limit = "off"`, func(b *Backend) { b.LogRateLimit = RateLimit{} }},
		{"relay_client_requests", "", `relay_client_requests = false`, func(b *Backend) { b.RelayClientRequests = false }},
		{"era", "", `era = "legacy"`, func(b *Backend) { b.Era = EraLegacy }},
		{"client_capabilities", "", `client_capabilities = ["roots"]`, func(b *Backend) { b.ClientCapabilities = ClientCapabilities{Set: true, Roots: true} }},
		{"client_capabilities none", "", `client_capabilities = []`, func(b *Backend) { b.ClientCapabilities = ClientCapabilities{Set: true} }},
		{"client_capabilities, configured roots, no relaying", "", "client_capabilities = [\"roots\"]\nroots = [\"file:///srv\"]\nrelay_client_requests = false", func(b *Backend) {
			b.ClientCapabilities, b.Roots, b.RelayClientRequests = ClientCapabilities{Set: true, Roots: true}, []string{"file:///srv"}, false
		}},
		{"list_ttl", "", `list_ttl = "5m"`, func(b *Backend) { b.ListTTL = 5 * time.Minute }},
		{"list_ttl off", "", `list_ttl = "off"`, func(b *Backend) {}},
		{"input_retry_timeout", "", `input_retry_timeout = "20s"`, func(b *Backend) { b.InputRetryTimeout = 20 * time.Second }},
		{"start", "", `start = "on-demand"`, func(b *Backend) { b.Start = StartOnDemand }},
		{"runner", "", `runner = "unit"`, func(b *Backend) { b.Runner = RunnerUnit }},
		{"runner from gateway", `runner = "unit"`, "", func(b *Backend) { b.Runner = RunnerUnit }},
		{"own runner beats gateway", `runner = "unit"`, `runner = "process"`, func(b *Backend) {}},
		{"idle_stop", "", `idle_stop = "10m"`, func(b *Backend) { b.IdleStop = 10 * time.Minute }},
		{"idle_stop off", "", `idle_stop = "off"`, func(b *Backend) {}},
		{"instance pool", "", "instance = \"session\"\npool_min_idle = 0\npool_max = 3\npool_acquire_timeout = \"5s\"\npool_replenish_delay = \"100ms\"", func(b *Backend) {
			b.Instance, b.PoolMinIdle, b.PoolMax = InstanceSession, 0, 3
			b.PoolAcquireTimeout, b.PoolReplenishDelay = 5*time.Second, 100*time.Millisecond
		}},
		{"roots", "", `roots = ["file:///srv/a", "file:///home/u/My%20Docs"]`, func(b *Backend) {
			b.Roots = []string{"file:///srv/a", "file:///home/u/My%20Docs"}
		}},
		{"inherits gateway timeout and rate limit", "request_timeout = \"7s\"\nlog_rate_limit = \"5/1s\"", "", func(b *Backend) {
			b.Timeout = 7 * time.Second
			b.LogRateLimit = RateLimit{Burst: 5, Interval: time.Second}
		}},
		{"health keys", "", "health_interval = \"off\"\nhealth_timeout = \"1s\"\nfailure_threshold = 2\nrecovery_multiplier = 4\nstart_wait = \"2s\"\ncatalog_grace = \"off\"\ncatalog_refresh = \"5m\"", func(b *Backend) {
			b.Health = Health{HealthTimeout: time.Second, FailureThreshold: 2, RecoveryMultiplier: 4, StartWait: 2 * time.Second, CatalogRefresh: 5 * time.Minute}
		}},
		{"call keys", "", "max_concurrent_calls = 2\nqueue_timeout = \"3s\"\nrate_limit = \"10/1s\"", func(b *Backend) {
			b.Calls = Calls{MaxConcurrentCalls: 2, QueueTimeout: 3 * time.Second, RateLimit: RateLimit{Burst: 10, Interval: time.Second}}
		}},
		{"inherits gateway health defaults", "health_interval = \"1s\"\ncatalog_refresh = \"1m\"", "failure_threshold = 7", func(b *Backend) {
			b.HealthInterval, b.CatalogRefresh, b.FailureThreshold = time.Second, time.Minute, 7
		}},
		{"integrity keys", "integrity = \"pin\"\nmax_schema_bytes = 1000", "integrity = \"warn\"\nmax_description_bytes = 100", func(b *Backend) {
			b.Integrity = Integrity{Policy: "warn", MaxDescriptionBytes: 100, MaxSchemaBytes: 1000}
		}},
		{"inherits gateway integrity", "integrity = \"pin\"", "", func(b *Backend) {
			b.Integrity.Policy = "pin"
		}},
		{"own values beat gateway", "request_timeout = \"7s\"\nlog_rate_limit = \"5/1s\"", "timeout = \"3s\"\nlog_rate_limit = \"off\"", func(b *Backend) {
			b.Timeout = 3 * time.Second
			b.LogRateLimit = RateLimit{}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := backendHeader + tt.toml + "\n"
			if tt.gateway != "" {
				// After the backend, so that Line stays 1 and order is shown not to matter.
				content += "[gateway]\n" + tt.gateway + "\n"
			}
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": content})
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			want := wantBackend(path)
			tt.want(want)
			if got := c.Backends["gh"]; !reflect.DeepEqual(got, want) {
				t.Errorf("Backends[gh] = %+v\nwant           %+v", got, want)
			}
		})
	}
}

func TestBackendDefinitionForms(t *testing.T) {
	tests := []struct {
		name     string
		toml     string
		wantLine int
	}{
		{"header after comments", "# a\n\n[backends.gh]\ncommand = \"/usr/bin/gh-mcp\"\n", 3},
		{"inline table", "[backends]\ngh = { command = \"/usr/bin/gh-mcp\" }\n", 2},
		{"dotted keys", "backends.gh.command = \"/usr/bin/gh-mcp\"\n", 1},
		{"sub-table first", "[backends.gh.env]\n[backends.gh]\ncommand = \"/usr/bin/gh-mcp\"\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tt.toml})
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			b := c.Backends["gh"]
			if b == nil || b.Command != "/usr/bin/gh-mcp" || b.File != path || b.Line != tt.wantLine {
				t.Errorf("Backends[gh] = %+v, want command /usr/bin/gh-mcp at %s:%d", b, path, tt.wantLine)
			}
		})
	}
}

func TestDisabledBackendNeedsNoCommand(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[backends.off]\nenabled = false\n"})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Backends["off"]; b == nil || b.Enabled || b.Command != "" {
		t.Errorf("Backends[off] = %+v, want disabled without command", b)
	}
}

func TestDropIns(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml": `[gateway]
endpoint = "/main"
page_size = 7

[backends.a]
command = "a"
`,
		// Lexical order: 10-c before 20-b, whatever order they were created in.
		"conf.d/20-b.toml": `[gateway]
endpoint = "/twenty"

[backends.b]
command = "b"
`,
		"conf.d/10-c.toml": `[gateway]
endpoint = "/ten"
bus = "none"
request_timeout = "5s"
[backends.c]
command = "c"
`,
		"conf.d/README":            "not toml at all [",
		"conf.d/30-old.toml.bak":   "not toml at all [",
		"conf.d/40-dir.toml/x.txt": "a directory named *.toml is not a drop-in",
	})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	ten, twenty := filepath.Join(dir, "conf.d", "10-c.toml"), filepath.Join(dir, "conf.d", "20-b.toml")
	if want := []string{path, ten, twenty}; !reflect.DeepEqual(c.Files, want) {
		t.Errorf("Files = %q, want %q", c.Files, want)
	}
	want := wantGateway()
	want.Endpoint = "/twenty"             // last file wins
	want.PageSize = 7                     // kept from main: not overridden
	want.Bus = "none"                     // set by a drop-in only
	want.RequestTimeout = 5 * time.Second // set by a drop-in only
	if !reflect.DeepEqual(c.Gateway, want) {
		t.Errorf("Gateway = %+v\nwant      %+v", c.Gateway, want)
	}
	for name, where := range map[string]struct {
		file string
		line int
	}{"a": {path, 5}, "b": {twenty, 4}, "c": {ten, 5}} {
		b := c.Backends[name]
		if b == nil {
			t.Errorf("backend %s missing", name)
			continue
		}
		if b.File != where.file || b.Line != where.line {
			t.Errorf("backend %s at %s:%d, want %s:%d", name, b.File, b.Line, where.file, where.line)
		}
		// A drop-in's gateway value is inherited by a backend of the main file.
		if b.Timeout != 5*time.Second {
			t.Errorf("backend %s Timeout = %v, want 5s from the drop-in's gateway", name, b.Timeout)
		}
	}
	if len(c.Backends) != 3 {
		t.Errorf("Backends = %v, want a, b, c", c.Backends)
	}
}

func TestEnabledBackends(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `
[backends.zeta]
command = "z"
[backends.alpha]
command = "a"
[backends.off]
enabled = false
[backends.Mid]
command = "m"
`})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range c.EnabledBackends() {
		names = append(names, b.Name)
	}
	if want := []string{"Mid", "alpha", "zeta"}; !reflect.DeepEqual(names, want) {
		t.Errorf("EnabledBackends() = %q, want %q", names, want)
	}
}

func TestBackendEqual(t *testing.T) {
	base := func() *Backend {
		b := wantBackend("/etc/mcpgate/mcpgate.toml")
		b.Args = []string{"-v"}
		b.Env = map[string]string{"A": "1"}
		b.Roots = []string{"file:///srv"}
		return b
	}
	tests := []struct {
		name   string
		change func(*Backend)
		equal  bool
	}{
		{"same", func(b *Backend) {}, true},
		{"file and line ignored", func(b *Backend) { b.File, b.Line = "/elsewhere.toml", 99 }, true},
		{"args removed", func(b *Backend) { b.Args = nil }, false},
		{"name", func(b *Backend) { b.Name = "x" }, false},
		{"command", func(b *Backend) { b.Command = "x" }, false},
		{"args", func(b *Backend) { b.Args = []string{"-w"} }, false},
		{"env value", func(b *Backend) { b.Env = map[string]string{"A": "2"} }, false},
		{"env key", func(b *Backend) { b.Env = map[string]string{"B": "1"} }, false},
		{"cwd", func(b *Backend) { b.Cwd = "/x" }, false},
		{"enabled", func(b *Backend) { b.Enabled = false }, false},
		{"required", func(b *Backend) { b.Required = true }, false},
		{"timeout", func(b *Backend) { b.Timeout++ }, false},
		{"tool_prefix", func(b *Backend) { b.ToolPrefix = "" }, false},
		{"max_restarts", func(b *Backend) { b.MaxRestarts++ }, false},
		{"restart_window", func(b *Backend) { b.RestartWindow++ }, false},
		{"restart_backoff_initial", func(b *Backend) { b.RestartBackoffInitial++ }, false},
		{"restart_backoff_max", func(b *Backend) { b.RestartBackoffMax++ }, false},
		{"log_rate_limit", func(b *Backend) { b.LogRateLimit.Burst++ }, false},
		{"relay_client_requests", func(b *Backend) { b.RelayClientRequests = false }, false},
		{"roots", func(b *Backend) { b.Roots = nil }, false},
		{"runner", func(b *Backend) { b.Runner = RunnerUnit }, false},
		{"memory_max", func(b *Backend) { b.MemoryMax = Infinity }, false},
		{"era", func(b *Backend) { b.Era = EraLegacy }, false},
		{"client_capabilities", func(b *Backend) { b.ClientCapabilities = ClientCapabilities{Set: true, Roots: true} }, false},
		{"input_retry_timeout", func(b *Backend) { b.InputRetryTimeout = time.Second }, false},
		{"list_ttl is the gateway's", func(b *Backend) { b.ListTTL = time.Minute }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.change(b)
			if got := a.Equal(b); got != tt.equal {
				t.Errorf("a.Equal(b) = %v, want %v", got, tt.equal)
			}
			if got := b.Equal(a); got != tt.equal {
				t.Errorf("b.Equal(a) = %v, want %v", got, tt.equal)
			}
		})
	}
	empty := &Backend{Args: []string{}, Env: map[string]string{}, Roots: []string{}}
	if !empty.Equal(&Backend{}) {
		t.Error("empty and nil Args/Env/Roots should be equal")
	}
	var none *Backend
	if !none.Equal(nil) || none.Equal(base()) || base().Equal(nil) {
		t.Error("nil handling of Equal is wrong")
	}
}

func TestRateLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    RateLimit
		wantErr string
	}{
		{"off", RateLimit{}, ""},
		{"1000/10s", RateLimit{Burst: 1000, Interval: 10 * time.Second}, ""},
		{"1/1ms", RateLimit{Burst: 1, Interval: time.Millisecond}, ""},
		{"", RateLimit{}, `invalid rate limit "": no "/" between lines and duration`},
		{"1000", RateLimit{}, `invalid rate limit "1000": no "/" between lines and duration`},
		{"OFF", RateLimit{}, `invalid rate limit "OFF": no "/" between lines and duration`},
		{"0/10s", RateLimit{}, `invalid rate limit "0/10s": 0 lines is ambiguous ("off" means no limit)`},
		{"-1/10s", RateLimit{}, `invalid rate limit "-1/10s": "-1" is not a positive number of lines`},
		{"x/10s", RateLimit{}, `invalid rate limit "x/10s": "x" is not a positive number of lines`},
		{"10/", RateLimit{}, `invalid rate limit "10/": "" is not a positive duration`},
		{"10/10", RateLimit{}, `invalid rate limit "10/10": "10" is not a positive duration`},
		{"10/0s", RateLimit{}, `invalid rate limit "10/0s": "0s" is not a positive duration`},
		{"10/-1s", RateLimit{}, `invalid rate limit "10/-1s": "-1s" is not a positive duration`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRateLimit(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseRateLimit(%q) error = %v, want %s", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRateLimit(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if back, err := ParseRateLimit(got.String()); err != nil || back != got {
				t.Errorf("ParseRateLimit(%q.String() = %q) = %+v, %v", tt.in, got.String(), back, err)
			}
		})
	}
}
