package journal

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"
)

// MessageID is a journal MESSAGE_ID: a stable 128-bit id, 32 lower-case hex
// digits, that names one kind of event so it can be found with
// `journalctl MESSAGE_ID=…`. The ids below are public API and never change.
type MessageID string

// The daemon's key events.
const (
	// MessageSpawn: a backend's process was started (attrs backend,
	// backend_pid).
	MessageSpawn MessageID = "2b33277e1b0746bc813fdb23aecef86b"
	// MessageBackendReady: a backend answered the MCP initialize handshake.
	MessageBackendReady MessageID = "458c1b16ec2944c2b4cd97d3702f5d3b"
	// MessageExit: a backend's process exited unexpectedly (LogBackendExit).
	MessageExit MessageID = "9b23901243df4482b4e136edd28fd45c"
	// MessageOOM: a backend was killed by the kernel's OOM killer
	// (LogBackendExit, with reason "oom").
	MessageOOM MessageID = "5a8f3c1e9b7d4e62a0c4d81f6e2b9a37"
	// MessageMemoryHigh: a backend uses more than 80% of its memory_max.
	MessageMemoryHigh MessageID = "c2d94e7a1f6b4a3d8e05b7c9a1d3f268"
	// MessageRestart: a backend is restarted after a failure.
	MessageRestart MessageID = "397e27b2ad5845dc85b67159de296942"
	// MessageGiveUp: a backend failed too often within its restart window
	// and is not restarted again.
	MessageGiveUp MessageID = "c47e64dc6bef486cbd78a4ab69361bee"
	// MessageStartFailed: a backend could not be started (spawn or
	// handshake error).
	MessageStartFailed MessageID = "15082e9382844a698a3a7dda1519248d"
	// MessageReady: the gateway serves its listeners (READY=1 sent).
	MessageReady MessageID = "9c3c805e4718443891a12e082e6f7c4a"
	// MessageReload: the configuration was reloaded.
	MessageReload MessageID = "6fd1f5b741604685b3e608d815da472d"
	// MessageReloadFailed: a reload was refused; the old configuration
	// stays in effect.
	MessageReloadFailed MessageID = "95ecc4544d664957ac6fed88380009a7"
	// MessageReexec: mcpgated re-executes in place (a new binary, same
	// PID), handing its running backends to the new one.
	MessageReexec MessageID = "fe525b7518604fe6a9108af288246516"
	// MessageAdopted: a backend's running server was taken over from the
	// previous mcpgated without a new handshake.
	MessageAdopted MessageID = "d60f254cb8234020a75192aa09de951f"
	// MessageAdoptFailed: a backend's server could not be taken over from
	// the previous mcpgated (it exited meanwhile, or its configuration
	// changed) and is started again.
	MessageAdoptFailed MessageID = "d0e543741d2847858cd3aa0b804031b4"
	// MessageHandoffRefused: the record the previous mcpgated handed on was
	// refused (tampered, another boot, another format): the daemon starts
	// clean.
	MessageHandoffRefused MessageID = "acdc0abbd6b949f483be84256b87c547"
	// MessageStopping: the gateway is shutting down.
	MessageStopping MessageID = "ee9603d251614e0786c04e18dd144f21"
	// MessageSuppressed: a backend's log lines were suppressed (written by
	// BackendLog with MCPGATE_SUPPRESSED=N).
	MessageSuppressed MessageID = "3d6d9d7424374dc88cccee6da0da918d"
	// MessageAccessDenied: a caller was refused (attrs peer, http_status,
	// reason; never the token).
	MessageAccessDenied MessageID = "e2c7994b55374c46a1e6b91578c0d764"
	// MessageAudit: a client called a tool, read a resource or got a
	// prompt (attrs client, backend, tool/uri/prompt, duration, outcome,
	// sizes; never arguments or results).
	MessageAudit MessageID = "af84f9ba2bdf44638ea8e737adfb73ba"
	// MessageAuthNone: the gateway runs with [gateway] auth = "none".
	MessageAuthNone MessageID = "273d966c9f434cc7943e1a61d6265f03"
	// MessageIntegrityBaseline: the integrity baseline of a backend was
	// recorded (attrs backend, items, state_file).
	MessageIntegrityBaseline MessageID = "7e659e1e529745a8972d985b8419cb2c"
	// MessageIntegrityChange: a tool, prompt or resource template differs
	// from the approved baseline, is new, or breaks a limit (attrs backend,
	// kind, item, reason, served, diff).
	MessageIntegrityChange MessageID = "73b48c658303459fb52bb385c022af9a"
	// MessageIntegrityDecision: an operator approved or rejected a change
	// (attrs backend, item, decision), or reset an unreadable state file.
	MessageIntegrityDecision MessageID = "50a71a94290e4afb887858c3c72712bd"
	// MessageIntegrityCorrupt: the integrity state file cannot be read;
	// nothing pinned is trusted until an operator resets it (attr
	// state_file).
	MessageIntegrityCorrupt MessageID = "8349695a82b941c4a172161e9666a771"
)

// Attr returns the attribute that makes Handler write id as MESSAGE_ID.
func (id MessageID) Attr() slog.Attr { return slog.String(MessageIDKey, string(id)) }

// String returns the id's 32 hex digits.
func (id MessageID) String() string { return string(id) }

// BackendExit describes a backend process that exited unexpectedly.
type BackendExit struct {
	Backend  string
	Instance string // "" when the backend has a single instance
	PID      int
	// Unit is the systemd unit it ran in (runner = "unit"), or "".
	Unit string
	// ExitCode is how it ended: "exited" with ExitStatus, "killed" or
	// "dumped" by ExitStatus, the number of Signal; "" when unknown.
	ExitCode   string
	ExitStatus int
	Signal     string
	// OOM is set when the kernel's OOM killer ended it: the entry then has
	// MessageOOM and reason "oom".
	OOM bool
	// StderrTail holds the last lines the process wrote to stderr, oldest
	// first.
	StderrTail []string
	// Reason, when not "", says why the gateway ended the process (e.g. it
	// stopped answering); it is written as MCPGATE_REASON.
	Reason string
}

// LogBackendExit logs e as one warning record with MessageExit. Its message
// says how the process ended and lists StderrTail, and its attributes are
// backend, backend_pid, instance (when set), exit_code ("exited", "killed"
// or "dumped", as systemd says), exit_status (the exit status or signal
// number), signal (e.g. "SIGKILL", when killed) and stderr_tail (the lines
// joined by newlines) — under Handler the fields MCPGATE_BACKEND,
// MCPGATE_BACKEND_PID, MCPGATE_INSTANCE, MCPGATE_EXIT_CODE,
// MCPGATE_EXIT_STATUS, MCPGATE_SIGNAL and MCPGATE_STDERR_TAIL. The record's
// source is the caller of LogBackendExit.
func LogBackendExit(ctx context.Context, logger *slog.Logger, e BackendExit) {
	h := logger.Handler()
	if !h.Enabled(ctx, slog.LevelWarn) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:])

	how := "ended (status unknown)"
	attrs := []slog.Attr{slog.String("backend", e.Backend), slog.Int("backend_pid", e.PID)}
	if e.Instance != "" {
		attrs = append(attrs, slog.String("instance", e.Instance))
	}
	if e.Unit != "" {
		attrs = append(attrs, slog.String("unit", e.Unit))
	}
	switch e.ExitCode {
	case "exited":
		how = fmt.Sprintf("exited with status %d", e.ExitStatus)
		attrs = append(attrs, slog.String("exit_code", e.ExitCode), slog.Int("exit_status", e.ExitStatus))
	case "killed", "dumped":
		how = "killed by signal " + e.Signal
		if e.ExitCode == "dumped" {
			how += " (core dumped)"
		}
		attrs = append(attrs, slog.String("exit_code", e.ExitCode), slog.Int("exit_status", e.ExitStatus), slog.String("signal", e.Signal))
	}
	id := MessageExit
	reason := e.Reason
	if e.OOM {
		id, reason = MessageOOM, "oom"
		how = "was killed by the kernel's OOM killer: it reached its memory_max"
	}
	msg := fmt.Sprintf("backend %q (pid %d) %s", e.Backend, e.PID, how)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	if reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	if len(e.StderrTail) > 0 {
		tail := strings.Join(e.StderrTail, "\n")
		msg += "; last stderr lines:\n" + tail
		attrs = append(attrs, slog.String("stderr_tail", tail))
	}
	attrs = append(attrs, id.Attr())
	r := slog.NewRecord(time.Now(), slog.LevelWarn, msg, pcs[0])
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r) // a failed log write has nowhere better to go
}
