package dbusapi

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// A caller's PID, as the bus reports it, was recorded when it connected:
// by the time we look at /proc, that process may have exited and its PID
// gone to another. A pidfd pins the process: while it still runs after
// the look, its PID named it throughout.

// pinCaller returns a pidfd of the caller whose credentials the bus gave:
// its ProcessFD when the bus sends one (newer buses do; Debian bookworm's
// dbus-daemon 1.14 does not), and then byBus, else one opened on pid now,
// which by itself cannot tell a process that exited, and whose PID was
// reused, before this moment (see connections). -1 when there is none:
// the process is gone, or the bus named no PID.
func pinCaller(creds map[string]dbus.Variant, pid uint32) (fd int, byBus bool) {
	if fd, ok := creds["ProcessFD"].Value().(dbus.UnixFD); ok {
		if got, err := pidfdPID(int(fd)); err == nil && got == int(pid) {
			return int(fd), true
		}
		unix.Close(int(fd))
		return -1, true
	}
	if pid == 0 {
		return -1, false
	}
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return -1, false
	}
	return fd, false
}

// pidfdAlive reports whether the process of pidfd still runs: a pidfd
// becomes readable once its process has terminated.
func pidfdAlive(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 0
	}
}

// pidfdPID returns the PID of pidfd's process, from its fdinfo.
func pidfdPID(pidfd int) (int, error) {
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "Pid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("fd %d is no pidfd", pidfd)
}
