package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/handoff"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/listeners"
)

// takeOver reads what the previous image handed on, if this process was
// re-executed: its listening sockets (nil if none were handed on) and the
// backends to adopt, which backendOptions gives to the backends of the
// same name and configuration. A record that fails authentication, or is
// of another boot, process or format, is refused and journaled; the
// daemon then starts clean: every child the previous image left is ended.
func (d *daemon) takeOver() (*listeners.Set, error) {
	lnsEnv, hasLns := os.LookupEnv(envListeners)
	fdEnv, hasFD := os.LookupEnv(handoff.EnvFD)
	os.Unsetenv(envListeners)
	os.Unsetenv(handoff.EnvFD)
	if !hasFD && !hasLns {
		return nil, nil
	}
	var set *listeners.Set
	if hasLns {
		files, err := handedListeners(lnsEnv)
		if err == nil {
			set, err = listeners.FromFiles(files, d.log)
		}
		if err != nil {
			return nil, fmt.Errorf("the listening sockets the previous mcpgated handed on: %w", err)
		}
	}
	if hasFD {
		rec, err := d.readRecord(fdEnv)
		if err != nil {
			d.log.Error(fmt.Sprintf("refusing what the previous mcpgated handed on: %v; starting clean", err), "err", err, journal.MessageHandoffRefused.Attr())
			endChildren(nil)
			return set, nil
		}
		d.adopting(rec)
	}
	return set, nil
}

// readRecord reads and authenticates the record in the descriptor fdEnv
// names.
func (d *daemon) readRecord(fdEnv string) (*handoff.Record, error) {
	fd, err := strconv.Atoi(fdEnv)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not a descriptor", handoff.EnvFD, fdEnv)
	}
	data, err := handoff.ReadFD(fd)
	if err != nil {
		return nil, err
	}
	key, err := handoff.LoadKey(stateDirectory(d.cfg.Gateway))
	if err != nil {
		return nil, err
	}
	boot, err := handoff.BootID()
	if err != nil {
		return nil, err
	}
	return handoff.Open(data, key, boot, os.Getpid())
}

// adopting keeps the record's backends for backendOptions, their pipes
// checked to be pipes.
func (d *daemon) adopting(rec *handoff.Record) {
	d.adopt = map[string]*backend.Adopted{}
	for _, b := range rec.Backends {
		files, err := pipes(b.Stdin, b.Stdout, b.Stderr)
		if err != nil {
			if b.Unit == "" && backend.OwnChild(b.PID) == nil {
				endChild(b.PID)
			}
			d.log.Warn(fmt.Sprintf("backend %q (pid %d): %v; starting it again", b.Name, b.PID, err), "backend", b.Name, journal.MessageAdoptFailed.Attr())
			continue
		}
		d.adopt[b.Name] = &backend.Adopted{Record: b, Stdin: files[0], Stdout: files[1], Stderr: files[2]}
	}
	if len(rec.Sessions) > 0 {
		if err := json.Unmarshal(rec.Sessions, &d.sessions); err != nil {
			d.log.Warn(fmt.Sprintf("the sessions the previous mcpgated handed on cannot be read: %v; their clients initialize again", err))
		}
	}
	d.log.Info(fmt.Sprintf("taking over %d backends and %d sessions from mcpgated %s", len(d.adopt), len(d.sessions), rec.Version),
		"backends", len(d.adopt), "sessions", len(d.sessions), "previous_version", rec.Version)
}

// restoreSessions takes over the sessions the previous image handed on,
// once the clients and profiles of this one are in place.
func (d *daemon) restoreSessions() {
	if d.sessions == nil {
		return
	}
	n, err := d.gw.RestoreSessions(d.sessions, d.clients.Load())
	if err != nil {
		d.log.Warn(fmt.Sprintf("took over %d sessions; %v", n, err), "sessions", n, "dropped", len(d.sessions)-n)
	} else {
		d.log.Info(fmt.Sprintf("took over %d sessions: their clients go on with the same Mcp-Session-Id", n), "sessions", n)
	}
	d.sessions = nil
}

// takeAdopted returns the handed-on server of the backend cfg, if it is
// one the backend can take over: the same process configuration.
func (d *daemon) takeAdopted(cfg *config.Backend) *backend.Adopted {
	d.adoptMu.Lock()
	defer d.adoptMu.Unlock()
	a := d.adopt[cfg.Name]
	if a == nil {
		return nil
	}
	delete(d.adopt, cfg.Name)
	if a.Record.Config != backend.ConfigDigest(cfg) {
		d.log.Info(fmt.Sprintf("backend %q (pid %d): its configuration changed; starting it again", cfg.Name, a.Record.PID), "backend", cfg.Name, journal.MessageAdoptFailed.Attr())
		d.endAdopted(a)
		return nil
	}
	return a
}

// endStrays ends every child of ours that the record does not name: the
// new image starts from a clean slate beside what it takes over. It runs
// before any backend starts.
func (d *daemon) endStrays() {
	keep := map[int]bool{}
	for _, a := range d.adopt {
		if a.Record.Unit == "" {
			keep[a.Record.PID] = true
		}
	}
	endChildren(keep)
}

// endUnadopted ends the handed-on servers no backend took over: removed
// from the configuration, or no longer a process.
func (d *daemon) endUnadopted() {
	d.adoptMu.Lock()
	defer d.adoptMu.Unlock()
	for name, a := range d.adopt {
		d.log.Info(fmt.Sprintf("backend %q (pid %d) is not configured to run as it did; ending it", name, a.Record.PID), "backend", name, journal.MessageAdoptFailed.Attr())
		d.endAdopted(a)
	}
	d.adopt = nil
}

// endAdopted ends a handed-on server no backend takes over: a child of
// ours, or the unit it runs in.
func (d *daemon) endAdopted(a *backend.Adopted) {
	for _, f := range []*os.File{a.Stdin, a.Stdout, a.Stderr} {
		f.Close()
	}
	if a.Record.Unit == "" {
		// A pid that is no child of ours (the previous image reaped it)
		// may be another process's now; one that is is killed and reaped,
		// also when it just exited of the input closed above.
		if backend.OwnChild(a.Record.PID) == nil {
			endChild(a.Record.PID)
		}
	} else if d.runner != nil {
		d.runner.StopUnit(a.Record.Unit)
	}
}

// endChildren kills and reaps every child of this process but those in
// keep: what a previous image left that nobody took over.
func endChildren(keep map[int]bool) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !keep[pid] {
				endChild(pid)
			}
		}
	}
}

// endChild kills the process group of pid, a child of ours, and reaps it.
func endChild(pid int) {
	if pid <= 0 {
		return
	}
	_ = unix.Kill(-pid, unix.SIGKILL)
	_ = unix.Kill(pid, unix.SIGKILL)
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// handedListeners parses envListeners' "FD:NAME,…".
func handedListeners(v string) ([]*os.File, error) {
	var files []*os.File
	for _, item := range strings.Split(v, ",") {
		fdText, name, ok := strings.Cut(item, ":")
		fd, err := strconv.Atoi(fdText)
		if !ok || err != nil || fd < 3 {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("%s=%q: %q is not FD:NAME", envListeners, v, item)
		}
		unix.CloseOnExec(fd)
		files = append(files, os.NewFile(uintptr(fd), name))
	}
	return files, nil
}

// pipes returns files for fds, which must be pipes, close-on-exec again;
// if one is not, it closes those that are.
func pipes(fds ...int) ([]*os.File, error) {
	for _, fd := range fds {
		var st unix.Stat_t
		if fd < 3 || unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			for _, other := range fds {
				if other != fd && other >= 3 && unix.Fstat(other, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
					unix.Close(other)
				}
			}
			return nil, fmt.Errorf("descriptor %d is not a pipe", fd)
		}
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		unix.CloseOnExec(fd)
		// Non-blocking, as the previous image's were: os.NewFile then
		// polls it, and its reads take deadlines (see backend.Detach).
		unix.SetNonblock(fd, true)
		files[i] = os.NewFile(uintptr(fd), "pipe")
	}
	return files, nil
}
