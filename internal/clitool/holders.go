package clitool

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeInode returns the inode that names f's pipe in /proc/PID/fd links,
// 0 if unknown. (Not through f.Fd, which would make f blocking, and a
// blocking read does not end when f is closed.)
func pipeInode(f *os.File) uint64 {
	info, err := f.Stat()
	if err != nil {
		return 0
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// killHolders kills the processes, other than this one, that hold one of
// the pipes with the given inodes: descendants of a program that left its
// process group (setsid) and kept its standard streams. Without a cgroup
// nothing else finds them. Each is signalled through a pidfd taken before
// its descriptors are read, so a pid reused meanwhile is never hit. It
// returns the pids it killed.
func killHolders(inodes ...uint64) []int {
	want := map[string]bool{}
	for _, ino := range inodes {
		if ino != 0 {
			want["pipe:["+strconv.FormatUint(ino, 10)+"]"] = true
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil || len(want) == 0 {
		return nil
	}
	self := os.Getpid()
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if holds(pid, want) && unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) == nil {
			killed = append(killed, pid)
		}
		unix.Close(pidfd)
	}
	return killed
}

// holds reports whether pid has a descriptor whose link is in want.
func holds(pid int, want map[string]bool) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && strings.HasPrefix(link, "pipe:") && want[link] {
			return true
		}
	}
	return false
}

// reap waits for those of pids that are (or become, as their parents
// die) our children: the daemon is a child subreaper, so orphans of a
// call come back to it. It stops when a round reaps none.
func reap(pids []int) {
	for len(pids) > 0 {
		left := pids[:0]
		for _, pid := range pids {
			var ws unix.WaitStatus
			_, err := unix.Wait4(pid, &ws, 0, nil)
			for errors.Is(err, unix.EINTR) {
				_, err = unix.Wait4(pid, &ws, 0, nil)
			}
			if err != nil {
				left = append(left, pid)
			}
		}
		if len(left) == len(pids) {
			return
		}
		pids = left
	}
}
