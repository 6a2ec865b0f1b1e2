// Package report holds the benchmark's results, writes them as JSON and
// renders them as a Markdown section with SVG plots.
package report

import (
	"encoding/json"
	"os"

	"github.com/mcpgate/mcpgate/bench/internal/load"
)

// Results is one run of the benchmark.
type Results struct {
	Date     string            `json:"date"` // RFC 3339, UTC
	Host     string            `json:"host"`
	Quick    bool              `json:"quick"`
	Machine  Machine           `json:"machine"`
	Versions map[string]string `json:"versions"` // gateway name → version
	Gateways []string          `json:"gateways"` // in table order; the floor first
	Load     []LoadRun         `json:"load"`
	Large    []LargeRun        `json:"large_result"`
	Idle     []IdleRun         `json:"idle_sessions"`
	// IdleAtScale is many more idle sessions, of the floor and mcpgate
	// only, without busy ones.
	IdleAtScale []IdleRun    `json:"idle_sessions_at_scale,omitempty"`
	Startup     []StartupRun `json:"startup"`
	IdleHeap    *IdleHeap    `json:"idle_heap,omitempty"` // mcpgate's live heap per idle session
	Profiles    []string     `json:"profiles,omitempty"`  // pprof files of mcpgate beside the results
	Notes       []string     `json:"notes,omitempty"`
	// Baseline is the other build of mcpgated this run compared with
	// (mcpbench -baseline), whose runs are named with BaseSuffix; "" for
	// none. Such a run is never the previous run of another.
	Baseline string `json:"baseline,omitempty"`
}

// Machine states what the numbers were measured on.
type Machine struct {
	Cores  int    `json:"cores"`
	CPU    string `json:"cpu"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Node   string `json:"node"`
	MemMiB int64  `json:"mem_mib"`
}

// LoadRun is one gateway under one load.
type LoadRun struct {
	Scenario string       `json:"scenario"` // "sessions", "payload" or "demo"
	Backend  string       `json:"backend"`  // "benchecho" or "demoserver"
	Gateway  string       `json:"gateway"`
	Sessions int          `json:"sessions"`
	Payload  int          `json:"payload_bytes"`
	Result   *load.Result `json:"result,omitempty"`
	// RSSKiB is the gateway's resident memory after the run, with its
	// children when it spawns one per session; Processes counts them.
	RSSKiB int64 `json:"rss_kib,omitempty"`
	// CPUPerCall is the gateway process's CPU time (user and system, its
	// children not counted) per call made, in microseconds: unlike
	// latency, it hardly depends on what else the machine does.
	CPUPerCall float64 `json:"cpu_us_per_call,omitempty"`
	// RoundCPU is CPUPerCall in each round of the load, in the order they
	// ran; the gateways take their turns within a round.
	RoundCPU  []float64 `json:"round_cpu_us_per_call,omitempty"`
	Processes int       `json:"processes,omitempty"`
	Skipped   string    `json:"skipped,omitempty"` // why the gateway could not run it
}

// The names of mcpgate's large-result runs in front of the benchmark's
// backend as a remote server, over TCP and on a unix socket.
const (
	RemoteTCP  = "mcpgate-remote-tcp"
	RemoteUnix = "mcpgate-remote-unix"
)

// LargeRun is one large tools/call result through one gateway.
type LargeRun struct {
	Gateway     string  `json:"gateway"`
	Bytes       int     `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	BaseRSSKiB  int64   `json:"base_rss_kib"`   // before the call
	PeakRSSKiB  int64   `json:"peak_rss_kib"`   // the gateway process's peak (VmHWM)
	PeakOverRes float64 `json:"peak_over_size"` // peak RSS / result size
	Error       string  `json:"error,omitempty"`
}

// IdleRun is many idle sessions and a few busy ones on one gateway.
type IdleRun struct {
	Gateway         string       `json:"gateway"`
	Idle            int          `json:"idle_sessions"`
	RSSBeforeKiB    int64        `json:"rss_before_kib"`
	RSSAfterKiB     int64        `json:"rss_after_kib"`
	BytesPerSession float64      `json:"bytes_per_idle_session"`
	Processes       int          `json:"processes"`
	Busy            *load.Result `json:"busy,omitempty"`
	Error           string       `json:"error,omitempty"`
}

// IdleHeap is mcpgate's live heap (HeapAlloc after a GC, from its
// profiling build) before and after opening idle sessions: what a session
// keeps, without the GC's headroom that RSS also shows.
type IdleHeap struct {
	Sessions        int     `json:"sessions"`
	BeforeBytes     int64   `json:"before_bytes"`
	AfterBytes      int64   `json:"after_bytes"`
	BytesPerSession float64 `json:"bytes_per_session"`
}

// StartupRun is mcpgated started under systemd-socket-activate with N
// backends; times are medians over the repetitions, in milliseconds.
type StartupRun struct {
	Backends    int     `json:"backends"`
	Repeats     int     `json:"repeats"`
	ReadyMs     float64 `json:"ready_ms"`             // first connection → READY=1
	HandshakeMs float64 `json:"slowest_handshake_ms"` // slowest of N backends spawned at once, to initialize answered
	OverMs      float64 `json:"over_handshake_ms"`    // ReadyMs - HandshakeMs
	RSSKiB      int64   `json:"rss_after_ready_kib"`
	Error       string  `json:"error,omitempty"`
}

// Write writes r as indented JSON to path.
func (r *Results) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read reads results written by Write.
func Read(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Find returns the load run of scenario, gateway and sessions/payload.
func (r *Results) Find(scenario, gateway string, sessions, payload int) *LoadRun {
	for i := range r.Load {
		l := &r.Load[i]
		if l.Scenario == scenario && l.Gateway == gateway && l.Sessions == sessions && l.Payload == payload {
			return l
		}
	}
	return nil
}
