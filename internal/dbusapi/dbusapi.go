// Package dbusapi exports mcpgate's control interface, org.mcpgate.Gateway1, on D-Bus and calls it.
package dbusapi

import (
	"context"
	"errors"

	"github.com/godbus/dbus/v5"
)

// Names of the interface. The introspection data is in
// packaging/dbus/org.mcpgate.Gateway1.xml.
const (
	// BusName is the well-known name the gateway owns.
	BusName = "org.mcpgate.Gateway1"
	// ManagerPath is the object implementing ManagerInterface.
	ManagerPath dbus.ObjectPath = "/org/mcpgate/Gateway1"
	// BackendPathPrefix starts the path of every backend's object; the
	// escaped backend name follows (see BackendPath).
	BackendPathPrefix = "/org/mcpgate/Gateway1/backend/"
	// ManagerInterface is the gateway as a whole.
	ManagerInterface = "org.mcpgate.Gateway1.Manager"
	// BackendInterface is one backend.
	BackendInterface = "org.mcpgate.Gateway1.Backend"
	// ManageAction is the polkit action that allows the mutating methods.
	ManageAction = "org.mcpgate.Gateway1.manage"
)

// Names of the errors the interface returns.
const (
	ErrorNoSuchBackend = "org.mcpgate.Gateway1.Error.NoSuchBackend"
	ErrorAccessDenied  = "org.mcpgate.Gateway1.Error.AccessDenied"
	ErrorInvalidConfig = "org.mcpgate.Gateway1.Error.InvalidConfig"
	ErrorFailed        = "org.mcpgate.Gateway1.Error.Failed"
)

var (
	// ErrNoSuchBackend is returned, possibly wrapped, for a backend name
	// that is not configured.
	ErrNoSuchBackend = errors.New("no such backend")
	// ErrAccessDenied is returned, possibly wrapped, when the caller may not
	// change the gateway.
	ErrAccessDenied = errors.New("access denied")
	// ErrInvalidConfig is returned, wrapped together with the parser's
	// error, when a reload is refused because the configuration is invalid.
	ErrInvalidConfig = errors.New("invalid configuration")
)

// InvalidConfig marks err, the configuration parser's error, as the reason
// a reload was refused: errors.Is(result, ErrInvalidConfig) holds, and the
// message stays the parser's own.
func InvalidConfig(err error) error { return invalidConfigError{err} }

type invalidConfigError struct{ err error }

func (e invalidConfigError) Error() string        { return e.err.Error() }
func (e invalidConfigError) Unwrap() []error      { return []error{ErrInvalidConfig, e.err} }
func (e invalidConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Gateway is the running gateway as the interface sees it; the daemon
// implements it. Every method may be called from many goroutines at once.
// Backends are looked up by name on every call, so a reload that replaces
// a backend needs no new objects.
type Gateway interface {
	// Version is the gateway's version.
	Version() string
	// Status is the one-line summary also sent to systemd as STATUS=.
	Status() string
	// NumSessions is the number of open MCP sessions.
	NumSessions() int
	// Backends returns every configured backend, sorted by name, without
	// StderrTail.
	Backends() []BackendStatus
	// Backend returns the named backend with StderrTail, or false.
	Backend(name string) (BackendStatus, bool)
	// Tools returns every tool the gateway exposes.
	Tools() []Tool
	// StartBackend, StopBackend and RestartBackend control the named
	// backend and return once done; an unknown name gives an error
	// wrapping ErrNoSuchBackend.
	StartBackend(ctx context.Context, name string) error
	StopBackend(ctx context.Context, name string) error
	RestartBackend(ctx context.Context, name string) error
	// Reload re-reads the configuration and returns once it is applied,
	// or the error that kept it from being applied: InvalidConfig(err)
	// for a configuration that does not parse or validate.
	Reload(ctx context.Context) error
}

// BackendStatus is what the interface shows of one backend: the properties
// of its object.
type BackendStatus struct {
	Name                 string   `json:"name"`
	State                string   `json:"state"` // starting, healthy, unhealthy, stopped or failed
	MainPID              uint32   `json:"main_pid"`
	NRestarts            uint32   `json:"restarts"`
	LastExitStatus       int32    `json:"last_exit_status"` // exit code, or signal number
	LastExitCode         string   `json:"last_exit_code"`   // exited, killed, dumped, or "" before any exit
	LastError            string   `json:"last_error"`
	StateChangeTimestamp uint64   `json:"state_change_timestamp"` // µs since the epoch
	Tools                []string `json:"tools"`                  // the exposed names of its tools
	Command              []string `json:"command"`
	URL                  string   `json:"url,omitempty"` // a remote backend's URL, without credentials
	// Era is the generation of MCP its server speaks, learned at every
	// start: "modern" (2026-07-28, stateless), "legacy" (initialize) or
	// "dual" (initialized, and 2026-07-28 per request for clients of that
	// era); "" before its first start. ProtocolVersion is the version in use.
	Era             string   `json:"era"`
	ProtocolVersion string   `json:"protocol_version"`
	StderrTail      []string `json:"stderr_tail,omitempty"`
	// The output pipeline's byte counts of tools/call results, in total
	// and by tool (its name at the backend).
	NBytesProcessed uint64            `json:"bytes_processed"`
	NBytesReturned  uint64            `json:"bytes_returned"`
	ToolOutputBytes []ToolOutputBytes `json:"tool_output_bytes,omitempty"`

	ConsecutiveFailures  uint32 `json:"consecutive_failures"`    // failed health checks in a row
	LastCheckTimestamp   uint64 `json:"last_check_timestamp"`    // µs since the epoch; 0 before the first check
	LastCheckLatencyUSec uint64 `json:"last_check_latency_usec"` // how long the last check took
	CircuitOpenTimestamp uint64 `json:"circuit_open_timestamp"`  // µs since the epoch; 0 while closed
	CallsInFlight        uint32 `json:"calls_in_flight"`
	CallsQueued          uint32 `json:"calls_queued"` // waiting for max_concurrent_calls
	NCalls               uint64 `json:"calls"`
	NFailedCalls         uint64 `json:"failed_calls"`
	NFallbacks           uint64 `json:"fallbacks"` // calls a fallback served for it

	// Instances of a backend with instance = "session", by number; empty
	// for others.
	Instances []Instance `json:"instances"`
	NIdle     uint32     `json:"idle_instances"` // started, bound to no session
	NBusy     uint32     `json:"busy_instances"` // bound to a session

	// Unit is the systemd unit its server runs in (runner = "unit"), or "".
	Unit string `json:"unit,omitempty"`
	// TokenExpiryTimestamp is when a remote backend's own OAuth access
	// token expires, in microseconds since the epoch; 0 without one. The
	// token itself is never shown.
	TokenExpiryTimestamp uint64 `json:"token_expiry_timestamp,omitempty"`
	// PeerPID, PeerUID and PeerGID are the server process behind a remote
	// backend's unix socket, as the kernel vouched for it (SO_PEERCRED)
	// when the last connection to it was made; PeerPID is 0 for a backend
	// on no unix socket, and before its first connection.
	PeerPID uint32 `json:"peer_pid,omitempty"`
	PeerUID uint32 `json:"peer_uid,omitempty"`
	PeerGID uint32 `json:"peer_gid,omitempty"`
	// What its server's cgroup uses now, read from the cgroup on every
	// read; math.MaxUint64 where unknown, as systemd shows it.
	MemoryCurrent uint64 `json:"memory_current"`
	TasksCurrent  uint64 `json:"tasks_current"`
	CPUUsageNSec  uint64 `json:"cpu_usage_nsec"`

	// PendingChanges are its tools, prompts and templates that differ from
	// the approved baseline (see IntegrityGateway).
	PendingChanges []PendingChange `json:"pending_changes"`
}

// Instance is one instance of a backend with instance = "session", on
// D-Bus a (usss) in the Backend property Instances.
type Instance struct {
	PID     uint32 `json:"pid"`     // 0 while no child runs
	Session string `json:"session"` // a hash of its session's id; "" while idle
	State   string `json:"state"`   // as the Backend's State
	Name    string `json:"name"`    // NAME-N: instance N of backend NAME
}

// ToolOutputBytes is one element of the ToolOutputBytes property, a(stt):
// a tool's name at its backend, bytes processed and bytes returned.
type ToolOutputBytes struct {
	Tool      string `json:"tool"`
	Processed uint64 `json:"processed"`
	Returned  uint64 `json:"returned"`
}

// ManagerStatus is what the interface shows of the gateway as a whole: the
// properties of the manager object.
type ManagerStatus struct {
	Version          string `json:"version"`
	NBackends        uint32 `json:"backends"`
	NHealthyBackends uint32 `json:"healthy_backends"`
	NTools           uint32 `json:"tools"`
	NSessions        uint32 `json:"sessions"`
	NClients         uint32 `json:"clients"` // clients with an open session
	Status           string `json:"status"`
	// Listeners are the sockets it serves MCP on.
	Listeners []Listener `json:"listeners"`
}

// Tool is one tool the gateway exposes.
type Tool struct {
	Name        string `json:"name"` // the exposed name, prefix included
	Backend     string `json:"backend"`
	Description string `json:"description"`
}

// BackendRef names a backend and its object.
type BackendRef struct {
	Name string
	Path dbus.ObjectPath
}
