package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
)

// Group is the sub-cgroup of one child. Start the child in it with
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}, so that it is
// in the group from its first instruction on.
type Group struct {
	dir string
	fd  int
}

// file is one cgroup control file a limit is written to.
type file struct {
	controller string // the controller that provides it
	name       string
	value      string
}

// files renders r as the cgroup-v2 control files systemd writes for the
// same settings, resolving percentages against h.
func files(r config.Resources, h host) []file {
	var out []file
	orMax := func(v uint64) string {
		if v == math.MaxUint64 {
			return "max"
		}
		return strconv.FormatUint(v, 10)
	}
	if r.MemoryHigh.IsSet() {
		out = append(out, file{"memory", "memory.high", orMax(r.MemoryHigh.Scale(h.memory))})
	}
	if r.MemoryMax.IsSet() {
		out = append(out, file{"memory", "memory.max", orMax(r.MemoryMax.Scale(h.memory))})
	}
	if r.TasksMax.IsSet() {
		out = append(out, file{"pids", "pids.max", orMax(r.TasksMax.Scale(h.tasksMax))})
	}
	if r.CPUWeight > 0 {
		out = append(out, file{"cpu", "cpu.weight", strconv.FormatUint(r.CPUWeight, 10)})
	}
	if r.CPUQuota > 0 {
		// systemd's default CPUQuotaPeriodSec=100ms, and at least 1ms of
		// quota, the kernel's minimum.
		const period = 100000 // µs
		quota := max(r.CPUQuotaPerSecUSec()*period/1000000, 1000)
		out = append(out, file{"cpu", "cpu.max", fmt.Sprintf("%d %d", quota, period)})
	}
	if r.IOWeight > 0 {
		out = append(out, file{"io", "io.weight", "default " + strconv.FormatUint(r.IOWeight, 10)})
	}
	return out
}

// accounting are the controllers enabled whenever the kernel offers them,
// so that a child's memory and task count are known without a limit, as
// systemd's default MemoryAccounting= and TasksAccounting= do.
var accounting = []string{"memory", "pids"}

// New creates the sub-cgroup backend-NAME for a child and writes r's limits
// to it. A sub-cgroup left empty by an earlier child of the same name is
// replaced; while one still holds processes, the new one is
// backend-NAME~2 (and so on). It refuses limits whose controller the
// daemon's cgroup does not offer.
func (t *Tree) New(name string, r config.Resources) (*Group, error) {
	limits := files(r, t.host)
	if missing := t.missing(limits, nil); len(missing) > 0 {
		return nil, t.missingError(missing)
	}
	if err := t.enable(limits); err != nil {
		return nil, err
	}
	dir, err := t.mkdir(groupPrefix + name)
	if err != nil {
		return nil, err
	}
	for _, f := range limits {
		if err := writeFile(filepath.Join(dir, f.name), f.value); err != nil {
			unix.Rmdir(dir)
			return nil, fmt.Errorf("set %s to %q in cgroup %s: %w", f.name, f.value, dir, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(dir)
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	return &Group{dir: dir, fd: fd}, nil
}

// mkdir creates the sub-cgroup name, replacing an empty one left by an
// earlier child. While an earlier child of the same name still runs (an
// instance of a pool a reload replaced, say), it creates name~2, name~3, …
// instead.
func (t *Tree) mkdir(name string) (string, error) {
	for i := 1; ; i++ {
		dir := filepath.Join(t.dir, name)
		if i > 1 {
			dir += "~" + strconv.Itoa(i)
		}
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) && unix.Rmdir(dir) == nil {
			err = os.Mkdir(dir, 0o755)
		}
		switch {
		case err == nil:
			return dir, nil
		case !errors.Is(err, fs.ErrExist) || i == 1000:
			return "", fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
}

// missing adds to have the controllers limits need that the daemon's
// cgroup does not offer.
func (t *Tree) missing(limits []file, have []string) []string {
	for _, f := range limits {
		if !slices.Contains(t.available, f.controller) && !slices.Contains(have, f.controller) {
			have = append(have, f.controller)
		}
	}
	return have
}

// missingError says which controllers limits need that the daemon's
// cgroup does not offer, and where they would come from.
func (t *Tree) missingError(missing []string) error {
	return fmt.Errorf("the limits need the cgroup v2 controller %s, which cgroup %s does not offer (its cgroup.controllers: %q); "+
		"the kernel or the service manager keeps it from the cgroup v2 hierarchy: on systemd, run mcpgated on a host booted with the unified hierarchy "+
		"with Delegate=yes (which delegates every controller), or remove the limits that need it",
		strings.Join(missing, ", "), t.dir, strings.Join(t.available, " "))
}

// enable writes the controllers limits need, and the accounting ones the
// kernel offers, to the daemon cgroup's cgroup.subtree_control, once each.
func (t *Tree) enable(limits []file) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range accounting {
		if slices.Contains(t.available, c) && !t.enabled[c] {
			// Best effort: without it usage reads as unknown.
			if writeFile(filepath.Join(t.dir, "cgroup.subtree_control"), "+"+c) == nil {
				t.enabled[c] = true
			}
		}
	}
	for _, f := range limits {
		if t.enabled[f.controller] {
			continue
		}
		if err := writeFile(filepath.Join(t.dir, "cgroup.subtree_control"), "+"+f.controller); err != nil {
			hint := ""
			if errors.Is(err, unix.EBUSY) {
				hint = fmt.Sprintf("; processes other than mcpgated are in cgroup %s (see its cgroup.procs): cgroup v2 gives no controllers to the children of a cgroup that holds processes, so start mcpgated alone in its unit", t.dir)
			}
			return fmt.Errorf("enable the %s controller in %s: %w%s", f.controller, filepath.Join(t.dir, "cgroup.subtree_control"), err, hint)
		}
		t.enabled[f.controller] = true
	}
	return nil
}

// FD returns a descriptor of the group's directory, for
// syscall.SysProcAttr.CgroupFD. It is valid until Remove.
func (g *Group) FD() int { return g.fd }

// Path returns the group's directory.
func (g *Group) Path() string { return g.dir }

// Kill sends SIGKILL to every process in the group at once through
// cgroup.kill, including those that left the child's process group or
// session, and those forking while it runs.
func (g *Group) Kill() error {
	err := writeFile(filepath.Join(g.dir, "cgroup.kill"), "1")
	if errors.Is(err, fs.ErrNotExist) {
		// Before Linux 5.14: kill what is listed; the kernel offers no way
		// to catch a process forking meanwhile.
		pids, perr := g.Procs()
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		return perr
	}
	return err
}

// Procs returns the processes in the group (its cgroup.procs).
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Populated reports whether any process is still in the group.
func (g *Group) Populated() (bool, error) {
	v, err := keyedValue(filepath.Join(g.dir, "cgroup.events"), "populated")
	return v != 0, err
}

// WaitEmpty returns once no process is left in the group, woken by the
// kernel's change notification on cgroup.events, or ctx's error.
func (g *Group) WaitEmpty(ctx context.Context) error {
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	in := os.NewFile(uintptr(ifd), "inotify")
	defer in.Close()
	events := filepath.Join(g.dir, "cgroup.events")
	if _, err := unix.InotifyAddWatch(ifd, events, unix.IN_MODIFY); err != nil {
		return fmt.Errorf("watch %s: %w", events, err)
	}
	stop := context.AfterFunc(ctx, func() { in.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		populated, err := g.Populated()
		if err != nil || !populated {
			return err
		}
		if _, err := in.Read(buf); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("cgroup %s still holds processes: %w", g.dir, ctx.Err())
			}
			return fmt.Errorf("read inotify: %w", err)
		}
	}
}

// Remove kills what is left in the group, waits until it is empty (or ctx
// is done) and removes it. The group is unusable afterwards.
func (g *Group) Remove(ctx context.Context) error {
	if g.fd < 0 {
		return nil
	}
	if err := g.Kill(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kill cgroup %s: %w", g.dir, err)
	}
	if err := g.WaitEmpty(ctx); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := unix.Rmdir(g.dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", g.dir, err)
	}
	unix.Close(g.fd)
	g.fd = -1
	return nil
}

// Unknown is the value of a Stats field whose controller is off, as
// systemd reports it (math.MaxUint64, "[not set]").
const Unknown = math.MaxUint64

// Stats is what a group's processes use now, or have used.
type Stats struct {
	MemoryCurrent uint64 // bytes, from memory.current; Unknown without the memory controller
	TasksCurrent  uint64 // from pids.current; Unknown without the pids controller
	CPUUsageNSec  uint64 // CPU time used, from cpu.stat usage_usec
}

// Stats reads the group's usage. A file absent because its controller is
// not enabled reads as Unknown.
func (g *Group) Stats() (Stats, error) {
	s := Stats{MemoryCurrent: Unknown, TasksCurrent: Unknown, CPUUsageNSec: Unknown}
	var errs []error
	read := func(dst *uint64, name string) {
		v, err := readUint(filepath.Join(g.dir, name))
		switch {
		case err == nil:
			*dst = v
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	read(&s.MemoryCurrent, "memory.current")
	read(&s.TasksCurrent, "pids.current")
	usec, err := keyedValue(filepath.Join(g.dir, "cpu.stat"), "usage_usec")
	switch {
	case err == nil:
		s.CPUUsageNSec = usec * 1000
	case !errors.Is(err, fs.ErrNotExist):
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// OOMKills returns how many processes of the group the kernel killed for
// passing memory.max (memory.events oom_kill), or 0 without the memory
// controller.
func (g *Group) OOMKills() (uint64, error) {
	n, err := keyedValue(filepath.Join(g.dir, "memory.events"), "oom_kill")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}
