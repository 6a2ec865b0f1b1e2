// Package clitool runs command-line programs as MCP tools: arguments checked against a schema, no shell, bounded output, whole process groups killed and reaped.
package clitool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// stderrLines is how many of a failed program's last stderr lines its
// result shows.
const stderrLines = 20

// Options are what every run needs besides the tool.
type Options struct {
	Env             []string // the daemon's environment; the tool's env is added
	MaxOutputBytes  int64    // standard output beyond this fails the call; default 16 MiB
	MaxStderrBytes  int64    // kept of standard error; default 64 KiB
	ReservedEnvVars []string // never passed on (systemd's variables for the daemon)
	// Cgroup, if set, makes the cgroup a run starts in; it is killed and
	// removed when the run ends, so nothing the program started outlives
	// the call.
	Cgroup func() (*cgroup.Group, error)
}

// ListEntry returns the tools/list object of tool.
func ListEntry(tool *config.CLITool) json.RawMessage {
	entry := map[string]any{"name": tool.Name, "inputSchema": tool.InputSchema}
	if tool.Description != "" {
		entry["description"] = tool.Description
	}
	return mustJSON(entry)
}

// Call runs tool with the arguments of a tools/call (raw JSON, possibly
// empty) and returns the tool result. Invalid arguments give a -32602
// *jsonrpc.Error, and nothing runs. A program that cannot start, exits
// non-zero, times out or writes too much gives a result with isError. Call
// returns only once the program and everything left in its process group
// are gone; ctx ending kills them.
func Call(ctx context.Context, tool *config.CLITool, rawArgs json.RawMessage, opts Options) (json.RawMessage, error) {
	args := map[string]any{}
	if len(bytes.TrimSpace(rawArgs)) > 0 && string(bytes.TrimSpace(rawArgs)) != "null" {
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tool %q: arguments must be a JSON object: %v", tool.Name, err)
		}
	}
	if err := Validate(tool.InputSchema, args); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tool %q: %v", tool.Name, err)
	}
	argv := Argv(tool.Command, args)
	stdin := ""
	if tool.Stdin != "" {
		stdin = config.ExpandPlaceholders(tool.Stdin, func(name string) string {
			if name == "input" {
				return string(mustJSON(args))
			}
			return spell(args[name])
		})
	}
	ctx, cancel := context.WithTimeout(ctx, tool.Timeout)
	defer cancel()
	res := run(ctx, argv, stdin, childEnv(opts, tool.Env), tool.Cwd, opts)
	return result(tool, argv[0], res), nil
}

// Argv expands the placeholders of command with args. Each element stays
// one argument whatever the values hold; an element that is only the
// placeholder of an absent argument is dropped.
func Argv(command []string, args map[string]any) []string {
	argv := make([]string, 0, len(command))
	for i, elem := range command {
		if names := config.Placeholders(elem); i > 0 && len(names) == 1 && strings.TrimSpace(elem) == "{{"+names[0]+"}}" {
			if _, ok := args[names[0]]; !ok {
				continue
			}
		}
		argv = append(argv, config.ExpandPlaceholders(elem, func(name string) string { return spell(args[name]) }))
	}
	return argv
}

// spell writes an argument value into an argv element: a string as it is,
// anything else as JSON; an absent value as "".
func spell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	return string(mustJSON(v))
}

func childEnv(opts Options, extra map[string]string) []string {
	env := make([]string, 0, len(opts.Env)+len(extra))
	for _, kv := range opts.Env {
		name, _, _ := strings.Cut(kv, "=")
		if _, override := extra[name]; override || contains(opts.ReservedEnvVars, name) {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// outcome is how one run ended.
type outcome struct {
	stdout   []byte
	stderr   []byte
	startErr error
	state    *os.ProcessState
	timedOut bool
	tooLarge bool
	elapsed  time.Duration
}

// run starts argv in its own process group (and its own cgroup, if
// opts.Cgroup gives one), feeds stdin, collects bounded output, and kills
// the group when ctx ends or the output is too large. It returns once the
// program is gone and, after a kill, without waiting for pipes that
// descendants outside its process group still hold.
func run(ctx context.Context, argv []string, stdin string, env []string, dir string, opts Options) outcome {
	start := time.Now()
	var group *cgroup.Group
	if opts.Cgroup != nil {
		g, err := opts.Cgroup()
		if err != nil {
			return outcome{startErr: err}
		}
		group = g
		defer removeGroup(group)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if group != nil {
		// In the cgroup from its first instruction: what it forks cannot
		// leave it, whatever its process group or session.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, group.FD()
	}
	// Pipes of our own rather than exec's: their read ends can be closed
	// while a read waits, so that descendants which keep the write ends
	// cannot keep the call.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return outcome{startErr: err}
	}
	defer stdinW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		return outcome{startErr: err}
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		outW.Close()
		return outcome{startErr: err}
	}
	defer errR.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	err = cmd.Start()
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		return outcome{startErr: err}
	}
	pgid := cmd.Process.Pid
	stdinDone := make(chan struct{})
	go func() { // closing stdinW ends a write that nobody reads
		defer close(stdinDone)
		_, _ = io.WriteString(stdinW, stdin)
		stdinW.Close()
	}()
	defer func() { <-stdinDone }()
	var out outcome
	tooLarge := make(chan struct{})
	outDone, errDone := make(chan []byte, 1), make(chan []byte, 1)
	go func() { outDone <- readBounded(outR, orDefault(opts.MaxOutputBytes, 16<<20), tooLarge) }()
	go func() { errDone <- readTail(errR, orDefault(opts.MaxStderrBytes, 64<<10)) }()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var escaped []int // killed outside the process group: maybe reparented to us
	kill := func() {
		_ = unix.Kill(-pgid, unix.SIGKILL)
		if group != nil {
			pids, _ := group.Procs()
			escaped = append(escaped, pids...)
			_ = group.Kill()
		}
	}
	// Wait for both pipes to end. Once the program was killed (timeout,
	// cancellation, excess output) and is gone, whatever still holds its
	// pipes left its process group: the call does not wait for it.
	done, tooLargeC, exitedC, gaveUp := ctx.Done(), (<-chan struct{})(tooLarge), (<-chan struct{})(exited), false
	for pending := 2; pending > 0; {
		select {
		case out.stdout = <-outDone:
			pending--
		case out.stderr = <-errDone:
			pending--
		case <-done:
			out.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
			done, gaveUp = nil, true
			kill()
		case <-tooLargeC:
			out.tooLarge = true
			tooLargeC, gaveUp = nil, true
			kill()
		case <-exitedC:
			exitedC = nil
		}
		if gaveUp && exitedC == nil && pending > 0 {
			if group == nil { // a cgroup's kill reached them already
				escaped = append(escaped, killHolders(pipeInode(outR), pipeInode(errR))...)
			}
			outR.Close() // the readers return what they have
			errR.Close()
			gaveUp = false
		}
	}
	<-exited
	out.state = cmd.ProcessState
	// Whatever is left in the group is an orphan now: kill it and reap the
	// members that were reparented to us (mcpgated is a child subreaper).
	kill()
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-pgid, &ws, 0, nil); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if group != nil {
		reapGroup(group, escaped)
	} else {
		reap(escaped)
	}
	out.elapsed = time.Since(start)
	return out
}

// reapGroup waits until the killed cgroup of a call is empty and reaps
// those of its processes that were reparented to us, as the process
// runner does for a server's cgroup. A process the kernel cannot kill at
// once (in uninterruptible sleep) leaves the group behind, removed later.
func reapGroup(g *cgroup.Group, pids []int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = g.WaitEmpty(ctx)
	for _, pid := range pids {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// removeGroup removes a call's cgroup, killing what is left in it.
func removeGroup(g *cgroup.Group) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = g.Remove(ctx)
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// readBounded reads r to its end, keeping at most limit bytes; past the
// limit it closes tooLarge once and discards the rest.
func readBounded(r io.Reader, limit int64, tooLarge chan struct{}) []byte {
	var buf bytes.Buffer
	n, _ := io.Copy(&buf, io.LimitReader(r, limit+1))
	if n > limit {
		close(tooLarge)
		_, _ = io.Copy(io.Discard, r)
		return buf.Bytes()[:limit]
	}
	return buf.Bytes()
}

// readTail reads r to its end and keeps its last max bytes.
func readTail(r io.Reader, max int64) []byte {
	var keep []byte
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		keep = append(keep, chunk[:n]...)
		if int64(len(keep)) > max {
			keep = append(keep[:0], keep[int64(len(keep))-max:]...)
		}
		if err != nil {
			return keep
		}
	}
}

// result builds the tools/call result of a run.
func result(tool *config.CLITool, program string, o outcome) json.RawMessage {
	fail := func(format string, args ...any) json.RawMessage {
		text := fmt.Sprintf(format, args...)
		if tail := lastLines(o.stderr, stderrLines); tail != "" {
			text += "\nstderr (last lines):\n" + tail
		}
		return mustJSON(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	}
	switch {
	case o.startErr != nil:
		return fail("tool %q: cannot run %s: %v", tool.Name, program, o.startErr)
	case o.timedOut:
		return fail("tool %q: %s did not finish within %s (timeout); it was killed with its process group", tool.Name, program, tool.Timeout)
	case o.tooLarge:
		return fail("tool %q: %s wrote more than max_message_bytes to its standard output; it was killed", tool.Name, program)
	case o.state == nil:
		return fail("tool %q: %s was cancelled", tool.Name, program)
	case !o.state.Success():
		return fail("tool %q: %s %s", tool.Name, program, exitText(o.state))
	}
	if !utf8.Valid(o.stdout) {
		return fail("tool %q: %s wrote output that is not UTF-8 text", tool.Name, program)
	}
	res := map[string]any{"content": []any{map[string]any{"type": "text", "text": string(o.stdout)}}}
	if tool.Output == "json" {
		var v any
		if err := json.Unmarshal(o.stdout, &v); err != nil {
			return fail("tool %q: %s wrote output that is not JSON (output = \"json\"): %v", tool.Name, program, err)
		}
		if _, isObject := v.(map[string]any); isObject {
			res["structuredContent"] = json.RawMessage(jsonrpc.Compact(o.stdout))
		}
	}
	return mustJSON(res)
}

func exitText(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by signal " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
