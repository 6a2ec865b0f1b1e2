// Package cgroup runs a daemon's children in cgroup-v2 sub-cgroups of the
// daemon's own delegated cgroup: one per child, with its limits, its usage,
// and cgroup.kill to end everything the child started.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
)

// GatewayDir is the sub-cgroup the daemon moves itself into: cgroup v2
// lets a cgroup with processes of its own give no controllers to its
// children ("no internal processes"), so the daemon leaves its cgroup to
// the children's groups.
const GatewayDir = "gateway"

// groupPrefix starts the name of every child's sub-cgroup.
const groupPrefix = "backend-"

// HowToDelegate says how to give mcpgated a delegated cgroup; it ends every
// error that finds none.
const HowToDelegate = "set Delegate=yes and ProtectControlGroups=no in mcpgated's service unit (systemctl edit mcpgate.service), " +
	"or run it by hand as systemd-run --user --scope -p Delegate=yes mcpgated ..."

// ErrNotDelegated is wrapped by the errors of Open that found no cgroup
// delegated to the daemon.
var ErrNotDelegated = errors.New("no delegated cgroup")

// Tree is the daemon's delegated cgroup, under which each child gets a
// sub-cgroup of its own. Its methods are safe for concurrent use.
type Tree struct {
	dir       string   // the daemon's cgroup, e.g. /sys/fs/cgroup/system.slice/mcpgate.service
	available []string // its cgroup.controllers
	host      host

	mu      sync.Mutex
	enabled map[string]bool // controllers written to its cgroup.subtree_control
}

// host is what percentages are shares of.
type host struct {
	memory   uint64 // physical memory in bytes
	tasksMax uint64 // the system's task maximum
}

// Open finds the daemon's own cgroup (from /proc/self/cgroup, under the
// cgroup2 mount in /proc/self/mountinfo), checks that it was delegated to
// the daemon, and moves the daemon into its sub-cgroup GatewayDir. The
// error wraps ErrNotDelegated and says how to get delegation when the
// cgroup is the root, is not writable, or (for root, who can write any
// cgroup) lacks systemd's trusted.delegate or user.delegate mark.
func Open() (*Tree, error) {
	t, err := find()
	if err != nil {
		return nil, err
	}
	if err := t.enter(); err != nil {
		return nil, err
	}
	return t, nil
}

// Check reports, without changing anything, what Open and New would refuse
// for children with the limits rs: no delegated cgroup, or a controller
// the limits need that it does not offer.
func Check(rs ...config.Resources) error {
	t, err := find()
	if err != nil {
		return err
	}
	return t.Check(rs...)
}

// Check reports a controller the limits rs need that t does not offer,
// as New would.
func (t *Tree) Check(rs ...config.Resources) error {
	var missing []string
	for _, r := range rs {
		missing = t.missing(files(r, t.host), missing)
	}
	if len(missing) > 0 {
		return t.missingError(missing)
	}
	return nil
}

// find locates the process's delegated cgroup.
func find() (*Tree, error) {
	mount, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	return findAt(mount, own)
}

func findAt(mount, own string) (*Tree, error) {
	if own == "/" {
		return nil, fmt.Errorf("%w: mcpgated runs in the root cgroup of %s, which is not its own to divide; %s", ErrNotDelegated, mount, HowToDelegate)
	}
	dir := filepath.Join(mount, own)
	if filepath.Base(dir) == GatewayDir && delegated(filepath.Dir(dir)) {
		dir = filepath.Dir(dir) // already moved, by an earlier Open
	}
	for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control"} {
		if err := unix.Access(filepath.Join(dir, f), unix.W_OK); err != nil {
			return nil, fmt.Errorf("%w: mcpgated may not write %s (%v); %s", ErrNotDelegated, filepath.Join(dir, f), err, HowToDelegate)
		}
	}
	if os.Geteuid() == 0 && !delegated(dir) {
		// Root may write every cgroup; only the mark says this one is ours.
		return nil, fmt.Errorf("%w: cgroup %s has no trusted.delegate or user.delegate mark from systemd; %s", ErrNotDelegated, dir, HowToDelegate)
	}
	controllers, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	return &Tree{dir: dir, available: strings.Fields(string(controllers)), host: readHost(), enabled: map[string]bool{}}, nil
}

// enter moves the daemon, with all its threads, into GatewayDir.
func (t *Tree) enter() error {
	gw := filepath.Join(t.dir, GatewayDir)
	if err := os.Mkdir(gw, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", gw, err)
	}
	if err := writeFile(filepath.Join(gw, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return fmt.Errorf("move mcpgated into cgroup %s: %w", gw, err)
	}
	return nil
}

// Dir returns the daemon's delegated cgroup directory.
func (t *Tree) Dir() string { return t.dir }

// Controllers returns the controllers the daemon's cgroup offers its
// children (its cgroup.controllers).
func (t *Tree) Controllers() []string { return slices.Clone(t.available) }

// delegated reports whether systemd marked dir as delegated, as
// Delegate=yes does (trusted.delegate needs privilege to read, so
// user.delegate is asked too).
func delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, name, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return false
}

// cgroup2Mount returns where the cgroup2 file system is mounted: on a host
// with the unified hierarchy /sys/fs/cgroup, on a hybrid one usually
// /sys/fs/cgroup/unified.
func cgroup2Mount(mountinfo string) (string, error) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		return unescapeMount(fields[4]), nil
	}
	return "", fmt.Errorf("%w: no cgroup2 file system is mounted (see %s); per-backend limits under the process runner need the cgroup v2 hierarchy", ErrNotDelegated, mountinfo)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup returns the process's cgroup-v2 path, the "0::PATH" line.
func ownCgroup(procCgroup string) (string, error) {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s has no cgroup v2 line (0::PATH)", ErrNotDelegated, procCgroup)
}

// readHost reads what percentages are shares of, as systemd does: physical
// memory, and the smaller of kernel.pid_max (less one: pid 0 is no task)
// and kernel.threads-max.
func readHost() host {
	var h host
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.memory = uint64(si.Totalram) * uint64(si.Unit)
	}
	pidMax, err1 := readUint("/proc/sys/kernel/pid_max")
	threadsMax, err2 := readUint("/proc/sys/kernel/threads-max")
	switch {
	case err1 == nil && err2 == nil:
		h.tasksMax = min(pidMax-1, threadsMax)
	case err1 == nil:
		h.tasksMax = pidMax - 1
	case err2 == nil:
		h.tasksMax = threadsMax
	}
	return h
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
}

// writeFile writes s to an existing cgroup file in one write, as the
// kernel expects.
func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// keyedValue returns the value of key in a flat-keyed cgroup file such as
// memory.events ("oom_kill 0").
func keyedValue(path, key string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %q", path, key)
}
