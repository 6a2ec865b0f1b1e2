// Package config loads and validates mcpgate's TOML configuration.
package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultPath is the main configuration file mcpgated reads when none is
// given. Drop-ins are every *.toml file in the conf.d directory beside it,
// read in lexical order.
const DefaultPath = "/etc/mcpgate/mcpgate.toml"

// DropInDir is the name of the drop-in directory beside the main file.
const DropInDir = "conf.d"

// Config is a fully resolved configuration: every default filled in, every
// value validated.
type Config struct {
	Gateway    Gateway
	Backends   map[string]*Backend   // by name
	Clients    map[string]*Client    // by name; see clients.go
	Composites map[string]*Composite // by name
	Profiles   map[string]*Profile   // by name; see profiles.go
	OAuth      OAuth                 // [oauth]; see oauth.go
	Telemetry  Telemetry             // [telemetry]; see telemetry.go
	Files      []string              // files read, main first
}

// Gateway holds the [gateway] table: how mcpgate listens and behaves as a
// whole.
type Gateway struct {
	Listen              []string      // default ["127.0.0.1:7431", "unix:/run/mcpgate/mcpgate.sock"]
	Endpoint            string        // default "/mcp"
	RequestTimeout      time.Duration // default 60s
	ShutdownGracePeriod time.Duration // default 5s
	DrainTimeout        time.Duration // default 10s
	MaxMessageBytes     int64         // default 16 MiB
	PageSize            int           // default 100
	MaxStreamEvents     int           // default 512
	AllowedOrigins      []string      // extra Origins allowed besides localhost ones
	AllowedHosts        []string      // extra Host header values allowed besides localhost ones
	Bus                 string        // "system" (default) | "session" | "none"
	LogTarget           string        // "auto" (default) | "journal" | "stderr"
	LogLevel            string        // "info" (default) | "debug" | "warn" | "error"
	LogRateLimit        RateLimit     // default for backends: 1000 lines / 10s
	CompositePrefix     string        // default "composite__"
	Access                            // auth, audit, credentials_directory
	MetricsListen       string        // "" (default, off) | address | "unix:PATH" | "fd:metrics"
	StatusResources     bool          // serve mcpgate://health and mcpgate://backend/NAME; default false
	ServerCard          string        // "identity" (default) | "tools" | "off": the server cards and AI catalog
	Health                            // defaults of every backend's health keys
	Limits                            // sessions, requests in flight, idle times
	IdleExit            time.Duration // 0 (default, "off"): never exit for being idle
	FirstListWait       time.Duration // default 2s; 0 ("off"): a list waits for no backend's first handshake
	Runner              string        // default of every backend's runner: "process" (default) | "unit"
	Integrity                         // defaults of every backend's integrity keys
	StateDirectory      string        // "" (default): $STATE_DIRECTORY, else /var/lib/mcpgate
}

// RateLimit limits how many log lines a backend may emit per interval.
// Burst 0 means unlimited. In TOML it is written "LINES/DURATION", such as
// "1000/10s", or "off".
type RateLimit struct {
	Burst    int
	Interval time.Duration
}

// Backend holds one [backends.NAME] table: a stdio MCP server mcpgate
// supervises.
type Backend struct {
	Name                  string
	File                  string // where [backends.NAME] was defined
	Line                  int
	CommandLine           int // where command was written in File; 0 if unknown
	Command               string
	Args                  []string
	Env                   map[string]string
	Cwd                   string
	Runner                string        // "process" or "unit"; default [gateway] runner
	Enabled               bool          // default true
	Required              bool          // default false
	Timeout               time.Duration // default Gateway.RequestTimeout
	MaxCallDuration       time.Duration // default 0 ("off"): none
	ClientRequestTimeout  time.Duration // default 5m
	ToolPrefix            string        // default NAME+"__"; "" allowed
	MaxRestarts           int           // default 5
	RestartWindow         time.Duration // default 60s
	RestartBackoffInitial time.Duration // default 1s
	RestartBackoffMax     time.Duration // default 60s
	LogRateLimit          RateLimit     // default Gateway.LogRateLimit
	RelayClientRequests   bool          // default true
	Roots                 []string      // file:// URIs answered to roots/list from config
	InheritEnv            []string      // daemon variables passed on besides the minimal set

	Transport   string              // "stdio" (default) | "cli" | "streamable-http" (default with url) | "sse"
	Tools       map[string]*CLITool // cli tools by name, from tools and adapter_file
	AdapterFile string              // file the cli tools were read from, if any

	// The output pipeline: applied by the gateway to results as they pass,
	// so Equal ignores them and a reload changes them without a restart.
	MaxOutputBytes  int64             // see Output; 0 is off (default)
	JSONSummaryOver int64             // see Output; 0 is off (default)
	ToolOverrides   map[string]Output // by the tool's name at the backend

	RequiresUnits       []string      // systemd units that must be active first
	PrerequisiteTimeout time.Duration // default 60s
	Prerequisite        *Prerequisite // nil if none

	Health // default Gateway.Health
	Calls
	Remote    // url and the keys of a remote backend; see remote.go
	Lifecycle // when children run and whom they serve
	Resources // cgroup limits of its children; see resources.go
	Integrity // default Gateway.Integrity; see integrity.go
	Protocol  // era, declared client capabilities, list_ttl; see protocol.go
}

// defaultGateway is the one place that knows the gateway defaults.
func defaultGateway() Gateway {
	return Gateway{
		Runner:              RunnerProcess,
		Listen:              []string{"127.0.0.1:7431", "unix:/run/mcpgate/mcpgate.sock"},
		Endpoint:            "/mcp",
		RequestTimeout:      60 * time.Second,
		ShutdownGracePeriod: 5 * time.Second,
		DrainTimeout:        10 * time.Second,
		MaxMessageBytes:     16 << 20,
		PageSize:            100,
		MaxStreamEvents:     512,
		Bus:                 "system",
		LogTarget:           "auto",
		ServerCard:          "identity",
		LogLevel:            "info",
		LogRateLimit:        RateLimit{Burst: 1000, Interval: 10 * time.Second},
		CompositePrefix:     "composite__",
		Access:              defaultAccess(),
		Health:              defaultHealth(),
		Limits:              defaultLimits(),
		Integrity:           defaultIntegrity(),
		FirstListWait:       2 * time.Second,
	}
}

// defaultBackend is the one place that knows the backend defaults; some are
// inherited from the resolved gateway g.
func defaultBackend(name string, g *Gateway) *Backend {
	return &Backend{
		Name:                  name,
		Enabled:               true,
		Timeout:               g.RequestTimeout,
		ClientRequestTimeout:  5 * time.Minute,
		ToolPrefix:            name + "__",
		MaxRestarts:           5,
		RestartWindow:         60 * time.Second,
		RestartBackoffInitial: 1 * time.Second,
		RestartBackoffMax:     60 * time.Second,
		LogRateLimit:          g.LogRateLimit,
		RelayClientRequests:   true,
		Transport:             "stdio",
		PrerequisiteTimeout:   60 * time.Second,
		Health:                g.Health,
		Calls:                 defaultCalls(),
		Lifecycle:             defaultLifecycle(),
		Runner:                g.Runner,
		Integrity:             g.Integrity,
		Protocol:              defaultProtocol(),
	}
}

// Default returns the configuration used when the files set nothing: all
// gateway defaults and no backends.
func Default() *Config {
	return &Config{
		Gateway:    defaultGateway(),
		Backends:   map[string]*Backend{},
		Clients:    map[string]*Client{},
		Composites: map[string]*Composite{},
		Profiles:   map[string]*Profile{},
		OAuth:      defaultOAuth(),
	}
}

// EnabledBackends returns the enabled backends sorted by name.
func (c *Config) EnabledBackends() []*Backend {
	var bs []*Backend
	for _, b := range c.Backends {
		if b.Enabled {
			bs = append(bs, b)
		}
	}
	slices.SortFunc(bs, func(a, b *Backend) int { return strings.Compare(a.Name, b.Name) })
	return bs
}

// Equal reports whether b and o configure the same backend. It ignores File
// and Line, so moving a definition between files is not a change. Nil and
// empty Args, Env and Roots are equal. Two nil backends are equal.
func (b *Backend) Equal(o *Backend) bool {
	if b == nil || o == nil {
		return b == o
	}
	return b.Name == o.Name &&
		b.Command == o.Command &&
		slices.Equal(b.Args, o.Args) &&
		maps.Equal(b.Env, o.Env) &&
		b.Cwd == o.Cwd &&
		b.Runner == o.Runner &&
		b.Enabled == o.Enabled &&
		b.Required == o.Required &&
		b.Timeout == o.Timeout &&
		b.MaxCallDuration == o.MaxCallDuration &&
		b.ClientRequestTimeout == o.ClientRequestTimeout &&
		b.ToolPrefix == o.ToolPrefix &&
		b.MaxRestarts == o.MaxRestarts &&
		b.RestartWindow == o.RestartWindow &&
		b.RestartBackoffInitial == o.RestartBackoffInitial &&
		b.RestartBackoffMax == o.RestartBackoffMax &&
		b.LogRateLimit == o.LogRateLimit &&
		b.RelayClientRequests == o.RelayClientRequests &&
		slices.Equal(b.Roots, o.Roots) &&
		slices.Equal(b.InheritEnv, o.InheritEnv) &&
		b.Transport == o.Transport &&
		b.AdapterFile == o.AdapterFile &&
		cliToolsEqual(b.Tools, o.Tools) &&
		prerequisitesEqual(b, o) &&
		b.Health == o.Health &&
		b.MaxConcurrentCalls == o.MaxConcurrentCalls &&
		b.QueueTimeout == o.QueueTimeout &&
		b.RateLimit == o.RateLimit &&
		slices.Equal(b.Fallback, o.Fallback) &&
		b.remoteEqual(&o.Remote) &&
		b.Lifecycle == o.Lifecycle &&
		b.Resources == o.Resources &&
		b.Era == o.Era && b.Declared() == o.Declared() && b.InputRetry() == o.InputRetry()
}

// String returns the TOML spelling of r: "off" when unlimited, otherwise
// "LINES/DURATION" such as "1000/10s".
func (r RateLimit) String() string {
	if r.Burst == 0 {
		return "off"
	}
	return strconv.Itoa(r.Burst) + "/" + r.Interval.String()
}

// ParseRateLimit parses "off" or "LINES/DURATION", where LINES is a positive
// integer and DURATION a positive Go duration such as "10s". "off" yields the
// zero RateLimit (unlimited).
func ParseRateLimit(s string) (RateLimit, error) {
	if s == "off" {
		return RateLimit{}, nil
	}
	lines, dur, ok := strings.Cut(s, "/")
	if !ok {
		return RateLimit{}, fmt.Errorf("invalid rate limit %q: no \"/\" between lines and duration", s)
	}
	n, err := strconv.Atoi(lines)
	switch {
	case err != nil || n < 0:
		return RateLimit{}, fmt.Errorf("invalid rate limit %q: %q is not a positive number of lines", s, lines)
	case n == 0:
		return RateLimit{}, fmt.Errorf("invalid rate limit %q: 0 lines is ambiguous (\"off\" means no limit)", s)
	}
	d, err := time.ParseDuration(dur)
	if err != nil || d <= 0 {
		return RateLimit{}, fmt.Errorf("invalid rate limit %q: %q is not a positive duration", s, dur)
	}
	return RateLimit{Burst: n, Interval: d}, nil
}
