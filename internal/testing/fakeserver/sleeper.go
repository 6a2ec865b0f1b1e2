package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sleeperSpec says how to start a grandchild.
type sleeperSpec struct {
	doubleFork    bool // start it through a parent that exits at once
	ignoreSigterm bool
	setsid        bool          // in a session (and process group) of its own
	max           time.Duration // it exits on its own after this, as a safety net
}

// startSleeper starts this executable as a sleeper in the caller's process
// group, sharing stderr, and returns the sleeper's PID once it has printed it.
// A direct sleeper is reaped by this process if it dies first; with
// doubleFork the intermediate parent is reaped here and the sleeper is
// reparented.
func startSleeper(self string, spec sleeperSpec, stderr io.Writer) (int, error) {
	args := []string{"--sleeper", "--sleeper-max", spec.max.String()}
	if spec.doubleFork {
		args = append(args, "--sleeper-double-fork")
	}
	if spec.ignoreSigterm {
		args = append(args, "--ignore-sigterm")
	}
	cmd := exec.Command(self, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: spec.setsid}
	cmd.Env = withoutFakeEnv(os.Environ())
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, fmt.Errorf("sleeper stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start sleeper %s: %w", self, err)
	}
	line, readErr := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if readErr != nil || err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, fmt.Errorf("sleeper did not print its pid (got %q): %w", line, err)
	}
	if spec.doubleFork {
		if err := cmd.Wait(); err != nil {
			return 0, fmt.Errorf("sleeper's parent: %w", err)
		}
	} else {
		go cmd.Wait()
	}
	return pid, nil
}

// runSleeper is the sleeper mode: print the PID on stdout, close it and sleep
// until killed or opts.sleeperMax passes. With --sleeper-double-fork it starts
// the real sleeper, passes its PID on and exits, orphaning it.
func runSleeper(opts *options, stdout, stderr io.Writer) int {
	if opts.sleeperDoubleFork {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "fakeserver sleeper:", err)
			return 1
		}
		pid, err := startSleeper(self, sleeperSpec{ignoreSigterm: opts.ignoreSigterm, max: opts.sleeperMax}, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "fakeserver sleeper:", err)
			return 1
		}
		fmt.Fprintln(stdout, pid)
		return 0
	}
	fmt.Fprintln(stdout, os.Getpid())
	if c, ok := stdout.(io.Closer); ok {
		c.Close()
	}
	time.Sleep(opts.sleeperMax)
	return 0
}

// withoutFakeEnv drops MCPGATE_FAKE_* so a sleeper does only what its flags say.
func withoutFakeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, envPrefix) {
			out = append(out, kv)
		}
	}
	return out
}
