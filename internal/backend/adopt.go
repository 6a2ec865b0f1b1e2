package backend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/handoff"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Detached is a running server handed to the next mcpgated: its entry in
// the handoff record, and the files whose descriptors the entry names,
// which must stay open across the re-exec.
type Detached struct {
	Record handoff.Backend
	Files  []*os.File // stdin, stdout, stderr: duplicates, close-on-exec until the re-exec
}

// Adopted is a server the previous mcpgated handed across its re-exec:
// its entry in the record and our ends of its pipes.
type Adopted struct {
	Record                handoff.Backend
	Stdin, Stdout, Stderr *os.File
}

// detachWait bounds how long Detach waits for the server's input to be
// written and its output readers to stop.
const detachWait = 5 * time.Second

// errNotServing is why a backend is not handed on: it is restarted by the
// next mcpgated instead.
func errNotServing(why string) error {
	return fmt.Errorf("not handed on: %s", why)
}

// Detachable returns why the backend's server cannot be handed to the
// next mcpgated whatever its state, or "" if it can be: only a stdio
// server the daemon runs itself (without a cgroup of its own) or in a
// unit, without a prerequisite process, outside a pool, not on demand.
func (b *Backend) Detachable() string {
	cfg := b.cfg
	switch {
	case cfg.IsRemote():
		return "a remote server gets a new session"
	case b.IsCLI():
		return "a cli backend runs nothing between calls"
	case cfg.Pooled():
		return `instance = "session" pools are started again`
	case cfg.OnDemand():
		return `start = "on-demand" servers are started again`
	case cfg.Prerequisite != nil:
		return "its prerequisite process is started again"
	case b.opts.Cgroups != nil && !cfg.UnitRunner():
		return "its cgroup is made again"
	}
	return ""
}

// Detach hands the backend's running server to the next mcpgated: it waits
// until what was queued for the server is written, stops reading its
// output at a message boundary, and returns the record's entry with what
// was read and not yet handled. From then on the backend is inert until
// Run's context ends: nothing signals, reads or writes the server. A
// backend that cannot be handed on (see Detachable), or is not serving,
// returns an error saying why and is unchanged.
func (b *Backend) Detach(ctx context.Context) (*Detached, error) {
	if why := b.Detachable(); why != "" {
		return nil, errNotServing(why)
	}
	var out *Detached
	cmd := command{op: opDetach, done: make(chan error, 1), out: &out}
	select {
	case b.cmds <- cmd:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case err := <-cmd.done:
		return out, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// detach is Detach on Run's goroutine, while conn serves.
func (s *supervision) detach(conn *Conn) (*Detached, error) {
	b := s.b
	var streams *stdio
	var pid int
	var unit string
	var invocation []byte
	p, child := conn.proc.(*process)
	u, inUnit := conn.proc.(*unitChild)
	switch {
	case s.prereq != nil || (child && p.group != nil) || (!child && !inUnit):
		return nil, errNotServing("its server is not a plain child or unit")
	case conn.Server() == nil || conn.ended():
		return nil, errNotServing("it is not serving")
	case child:
		streams, pid = &p.stdio, p.pid
	default:
		streams, pid, unit, invocation = &u.stdio, u.id(), u.unitName(), u.inst.InvocationID()
	}
	handshake, err := encodeCache(&catalogCache{server: conn.Server(), lists: b.Lists()})
	if err != nil {
		return nil, fmt.Errorf("not handed on: its handshake: %w", err)
	}
	files, err := dupFiles(streams.stdin, streams.stdout, streams.stderr)
	if err != nil {
		return nil, fmt.Errorf("not handed on: %w", err)
	}
	detached := func(v bool) {
		if child {
			p.detached.Store(v)
		} else {
			u.detached.Store(v)
		}
	}
	detached(true)
	if err := conn.in.pause(detachWait); err != nil {
		detached(false)
		closeFiles(files)
		return nil, fmt.Errorf("not handed on: %w", err)
	}
	unread, err := conn.stopReading(detachWait)
	if err != nil {
		// Its output is half read: it cannot go on here either.
		detached(false)
		closeFiles(files)
		conn.reason.Store(ptr("its output could not be handed on"))
		conn.abort()
		return nil, fmt.Errorf("not handed on: %w", err)
	}
	var abandoned []int64
	conn.Calls(func(c *Call) { abandoned = append(abandoned, c.ID) })
	rec := handoff.Backend{
		Name: b.name, Config: ConfigDigest(b.cfg), PID: pid,
		Stdin: fdOf(files[0]), Stdout: fdOf(files[1]), Stderr: fdOf(files[2]),
		Unread: unread, NextID: conn.nextID.Load(), Abandoned: abandoned,
		Modern: conn.modern.Load(), Handshake: handshake,
		Unit: unit, Invocation: invocation,
	}
	b.log.Info(fmt.Sprintf("backend %q (pid %d) handed to the next mcpgated", b.name, pid), "backend_pid", pid, "unit", unit, "unread_bytes", len(unread), "abandoned", len(abandoned))
	return &Detached{Record: rec, Files: files}, nil
}

// fdOf returns f's descriptor without making it blocking, as f.Fd()
// would: the pipes stay non-blocking, and their deadlines work, here and
// in the next image.
func fdOf(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}

// dupFiles duplicates the files' descriptors, close-on-exec: the record
// names the duplicates, which outlive the connection's own files.
func dupFiles(files ...*os.File) ([]*os.File, error) {
	var out []*os.File
	for _, f := range files {
		fd, err := unix.FcntlInt(uintptr(fdOf(f)), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			closeFiles(out)
			return nil, fmt.Errorf("duplicate %s: %w", f.Name(), err)
		}
		out = append(out, os.NewFile(uintptr(fd), f.Name()))
	}
	return out, nil
}

// adopt takes over the server a previous mcpgated handed on: it is
// published as it was, healthy with its lists, without a new handshake.
// It returns nil when the server is gone (then it is started as after any
// exit).
func (s *supervision) adopt(a *Adopted) *Conn {
	b := s.b
	rec := a.Record
	files := []*os.File{a.Stdin, a.Stdout, a.Stderr}
	cache, err := parseCache(rec.Handshake)
	streams := stdio{stdin: a.Stdin, stdout: a.Stdout, stderr: a.Stderr}
	var proc child
	switch {
	case err != nil:
	case rec.Unit != "" && b.opts.UnitRunner == nil:
		err = errors.New(`runner = "unit" is not in use any more`)
	case rec.Unit != "":
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
		var u *unitChild
		if u, err = b.attachUnit(ctx, rec, streams); err == nil {
			proc = u
		}
		cancel()
	default:
		var osp *os.Process
		if err = OwnChild(rec.PID); err == nil && exitedChild(rec.PID) {
			err = errors.New("it exited")
		}
		if err == nil {
			osp, err = os.FindProcess(rec.PID) // a pidfd: the child cannot be reaped by anyone else
		}
		if err == nil {
			proc = &process{stdio: streams, osp: osp, pid: rec.PID}
		}
	}
	if err != nil {
		closeFiles(files)
		if rec.Unit == "" && OwnChild(rec.PID) == nil {
			// Still ours: nothing of it stays, and it is reaped.
			_ = unix.Kill(-rec.PID, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(rec.PID, &ws, 0, nil)
		} else if rec.Unit != "" && b.opts.UnitRunner != nil {
			b.opts.UnitRunner.StopUnit(rec.Unit) // its pipes are closed: it is of no use
		}
		b.log.Warn(fmt.Sprintf("backend %q (pid %d) could not be taken over from the previous mcpgated (%v); starting it again", b.name, rec.PID, err),
			"backend_pid", rec.PID, journal.MessageAdoptFailed.Attr())
		return nil
	}
	conn := newConn(b, proc)
	conn.nextID.Store(rec.NextID)
	conn.modern.Store(rec.Modern)
	conn.unread = rec.Unread
	conn.server.Store(cache.server)
	b.mu.Lock()
	b.conn = conn
	b.publishLocked()
	b.mu.Unlock()
	conn.start()
	for _, id := range rec.Abandoned {
		// Their askers are gone: the server may stop working on them.
		params := append([]byte(`{"requestId":`+strconv.FormatInt(id, 10)+`,"reason":`), jsonrpc.AppendString(nil, "mcpgate re-executed")...)
		conn.trySend(jsonrpc.AppendNotification(nil, "notifications/cancelled", append(params, '}')))
	}
	b.lists.Store(cache.lists)
	b.served.Store(cache.lists)
	b.setState(Healthy, func(st *Status) { st.Server, st.PID, st.LastError = cache.server, rec.PID, "" })
	go b.watch(conn)
	go conn.lists.run()
	b.log.Info(fmt.Sprintf("backend %q (pid %d) taken over from the previous mcpgated without a new handshake: %d tools", b.name, rec.PID, len(cache.lists.Tools)),
		"backend_pid", rec.PID, "tools", len(cache.lists.Tools), "unread_bytes", len(rec.Unread), "abandoned", len(rec.Abandoned), journal.MessageAdopted.Attr())
	b.settle()
	return conn
}

// OwnChild checks that pid is still a child of ours, running or exited
// and not yet reaped, that leads its process group: one that the previous
// image reaped may be another process's now, which must not be signalled.
// A child of ours with that pid is the one handed on: the previous image
// spawned none after it handed this one on.
func OwnChild(pid int) error {
	f := procStat(pid)
	if len(f) < 3 || f[1] != strconv.Itoa(os.Getpid()) || f[2] != strconv.Itoa(pid) {
		return errors.New("it is not our child any more")
	}
	return nil
}

// exitedChild reports whether the child pid has exited, not yet reaped.
func exitedChild(pid int) bool {
	f := procStat(pid)
	return len(f) > 0 && f[0] == "Z"
}

// procStat returns the fields of /proc/PID/stat after the command (state,
// ppid, pgrp, …), nil if there is no such process.
func procStat(pid int) []string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command is in parentheses and may hold any byte.
	i := strings.LastIndexByte(string(stat), ')')
	return strings.Fields(string(stat[i+1:]))
}

// ConfigDigest returns a digest of what makes a backend's server the
// process it is: a backend whose digest changed is started again rather
// than taken over. Other keys apply to a server taken over as to a running
// one.
func ConfigDigest(cfg *config.Backend) string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Command    string
		Args       []string
		Env        map[string]string
		Cwd        string
		InheritEnv []string
		Runner     string
		Transport  string
		Era        string
		Resources  config.Resources
	}{cfg.Command, cfg.Args, cfg.Env, cfg.Cwd, cfg.InheritEnv, cfg.Runner, cfg.Transport, cfg.Era, cfg.Resources})
	return hex.EncodeToString(h.Sum(nil))
}
