package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// proc is a child process started by a test. It runs in its own process
// group so that killing it also kills anything it spawned.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string        // file receiving the child's stdout and stderr
	done    chan struct{} // closed once cmd.Wait has returned
	err     error         // cmd.Wait's result; read only after done is closed
}

// startProc starts cmd with stdout and stderr going to logPath and registers a
// t.Cleanup that kills the process group and reaps the child, whatever the
// test's outcome. The SIGKILL parent-death signal covers the case where the
// test binary itself dies (go test -timeout) and cleanups never run.
func startProc(t *testing.T, name string, cmd *exec.Cmd, logPath string) *proc {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (%s): %v", name, cmd.Path, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL to the process group unless the child has already been
// reaped (its PID may then belong to someone else), and waits until it is.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// wait waits up to timeout for the child to exit by itself and returns its
// exit code; on timeout it kills the child and fails the test.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
		t.Fatalf("%s (pid %d) still running after %v; killed it. Output: %s\n%s",
			p.name, p.cmd.Process.Pid, timeout, p.logPath, p.output())
	}
	var exitErr *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exitErr):
		return exitErr.ExitCode()
	default:
		t.Fatalf("%s: %v", p.name, p.err)
		return -1
	}
}

// output returns what the child wrote so far, for failure messages.
func (p *proc) output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	return string(b)
}

// exited reports whether the child has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port reserved for
// the test (testutil.FreePort).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
}

// awaitHTTP polls url with GET until the server answers with any HTTP status,
// p exits, or timeout passes. A status is enough: an MCP endpoint may answer a
// bare GET with 400 or 405, and that still proves it is serving.
func awaitHTTP(ctx context.Context, url string, p *proc, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before %s answered", p.name, p.err, url)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer at %s within %v: last error: %w", p.name, url, timeout, err)
		case <-tick.C:
		}
	}
}

// packageDir returns the absolute path of this package's directory, which is
// the working directory of its tests.
func packageDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
