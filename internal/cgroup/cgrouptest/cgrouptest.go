// Package cgrouptest gives tests a cgroup delegated the way systemd's
// Delegate=yes does it, and removes it with everything in it afterwards.
package cgrouptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Mount returns where the cgroup2 file system is mounted, or skips the
// test on a host without one: that is a property of the host.
func Mount(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if i := slices.Index(fields, "-"); i >= 5 && i+1 < len(fields) && fields[i+1] == "cgroup2" {
			return fields[4]
		}
	}
	t.Skip("this host has no cgroup v2 hierarchy mounted; nothing to test")
	return ""
}

// New creates a fresh cgroup directly under the cgroup2 mount, marked with
// user.delegate=1 as systemd marks a unit with Delegate=yes, and returns
// its directory. It needs root (see testutil.Unavailable). In t.Cleanup it
// kills every process left in it and removes it with its sub-cgroups.
func New(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "cgroup test: needs root to create cgroups")
	}
	mount := Mount(t)
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(mount, "mcpgate-test-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create test cgroup: %v", err)
	}
	t.Cleanup(func() { removeTree(t, dir) })
	if err := unix.Setxattr(dir, "user.delegate", []byte("1"), 0); err != nil {
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("this host's cgroup2 file system takes no user.* extended attributes (Linux before 5.7?), which mark delegation: %v", err)
		}
		t.Fatalf("mark %s delegated: %v", dir, err)
	}
	return dir
}

// Enter moves the test process into a cgroup made by New for the rest of
// the test, and back to where it was in t.Cleanup, so that cgroup.Open in
// the test finds that cgroup its own. Tests that use it must not run in
// parallel.
func Enter(t testing.TB) string {
	t.Helper()
	dir := New(t)
	EnterDir(t, dir)
	return dir
}

// EnterDir moves the test process into dir, a cgroup made by New, for the
// rest of the test, and back in t.Cleanup.
func EnterDir(t testing.TB, dir string) {
	t.Helper()
	mount := Mount(t)
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var home string
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			home = filepath.Join(mount, p)
		}
	}
	if home == "" {
		t.Fatal("no cgroup v2 line in /proc/self/cgroup")
	}
	if err := write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		t.Fatalf("move the test into %s: %v", dir, err)
	}
	// Registered after New's, so it runs first: out before removal.
	t.Cleanup(func() {
		if err := write(filepath.Join(home, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			t.Errorf("move the test back into %s: %v", home, err)
		}
	})
}

// removeTree kills every process under dir and removes its cgroups,
// deepest first, each once it is empty.
func removeTree(t testing.TB, dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err := write(filepath.Join(dir, "cgroup.kill"), "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("kill what is left in %s: %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := awaitEmpty(ctx, dir); err != nil {
		t.Errorf("test cgroup %s: %v", dir, err)
	}
	for _, d := range slices.Backward(dirs) {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Errorf("remove test cgroup %s: %v", d, err)
		}
	}
}

// awaitEmpty waits for "populated 0" in dir's cgroup.events, woken by
// inotify.
func awaitEmpty(ctx context.Context, dir string) error {
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	in := os.NewFile(uintptr(ifd), "inotify")
	defer in.Close()
	events := filepath.Join(dir, "cgroup.events")
	if _, err := unix.InotifyAddWatch(ifd, events, unix.IN_MODIFY); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { in.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		b, err := os.ReadFile(events)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("populated 0")) {
			return nil
		}
		if _, err := in.Read(buf); err != nil {
			return errors.Join(err, ctx.Err())
		}
	}
}

func write(path, s string) error {
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

// Controllers returns the controllers dir offers its children.
func Controllers(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}
