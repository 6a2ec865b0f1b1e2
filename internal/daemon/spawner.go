package daemon

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// The main goroutine runs on the main thread from here on (see spawner).
func init() { runtime.LockOSThread() }

// spawner starts the backends' processes, and re-executes mcpgated, on one
// thread: the main one. A child's parent-death signal (SIGKILL, so that a
// killed daemon leaves no child behind) fires when the thread that started
// it ends, and execve ends every thread but its caller's; the main thread
// of one image is the main thread of the next, so a child started on it
// outlives any number of re-execs and still dies with the daemon.
type spawner struct {
	reqs chan func()
	done chan struct{} // closed when serve returned: requests run where they are made
}

func newSpawner() *spawner {
	return &spawner{reqs: make(chan func()), done: make(chan struct{})}
}

// serve runs requests on the calling goroutine, which must be locked to
// the main thread, until stop is closed.
func (s *spawner) serve(stop <-chan struct{}) {
	defer close(s.done)
	for {
		select {
		case f := <-s.reqs:
			f()
		case <-stop:
			return
		}
	}
}

// run runs f on the spawner's thread, or here once serve returned.
func (s *spawner) run(f func()) {
	ran := make(chan struct{})
	select {
	case s.reqs <- func() { f(); close(ran) }:
		<-ran
	case <-s.done:
		f()
	}
}

// start is a backend.Spawner.
func (s *spawner) start(cmd *exec.Cmd) error {
	var err error
	s.run(func() { err = cmd.Start() })
	return err
}

// exec replaces the process image with path, keeping the descriptors of
// keep open (and every other one closed, as they are close-on-exec). It
// returns only if execve failed, with keep close-on-exec again.
func (s *spawner) exec(path string, argv, env []string, keep []*os.File) error {
	var err error
	s.run(func() {
		// f.Fd() would make the files blocking, which the next image
		// undoes for the pipes it adopts; the raw descriptor leaves them.
		for _, f := range keep {
			if e := withFD(f, func(fd uintptr) error { _, e := unix.FcntlInt(fd, unix.F_SETFD, 0); return e }); e != nil {
				err = e
			}
		}
		if err == nil {
			err = syscall.Exec(path, argv, env)
		}
		for _, f := range keep {
			withFD(f, func(fd uintptr) error { _, e := unix.FcntlInt(fd, unix.F_SETFD, unix.FD_CLOEXEC); return e })
		}
	})
	if err == nil {
		err = errors.New("execve returned")
	}
	return err
}

// spawn returns the daemon's backend.Spawner, nil without a spawner.
func (d *daemon) spawn() backend.Spawner {
	if d.spawner == nil {
		return nil
	}
	return d.spawner.start
}

// withFD runs fn with f's descriptor, leaving its blocking mode alone.
func withFD(f *os.File, fn func(fd uintptr) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(fd) }); err != nil {
		return err
	}
	return ferr
}
