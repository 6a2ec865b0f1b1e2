// Package modernserver runs server.cjs, a 2026-07-28 MCP server built
// with the official TypeScript SDK v2, for tests of backends of that era.
package modernserver

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Stdio returns the command line and environment that serve the fixture
// over stdio, or skips the test (see testutil.Unavailable) when node or
// the SDK, installed by packaging/ci/deps.sh, are missing.
func Stdio(t testing.TB) (argv []string, env map[string]string) {
	t.Helper()
	node, modules := prerequisites(t)
	return []string{node, Script(), "stdio"}, map[string]string{"NODE_PATH": modules}
}

// Script is the path of server.cjs.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "server.cjs")
}

func prerequisites(t testing.TB) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node is not installed (packaging/ci/deps.sh installs it): %v", err)
	}
	modules = filepath.Join(testutil.CacheDir(), "npm", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "server", "package.json")); err != nil {
		testutil.Unavailable(t, "@modelcontextprotocol/server is not installed (run packaging/ci/deps.sh, which make check runs): %v", err)
	}
	return node, modules
}

// HTTP serves the fixture over Streamable HTTP on a free loopback port
// until the test ends and returns its MCP endpoint. The process is killed
// by its PID and reaped at the end of the test.
func HTTP(t testing.TB) string {
	t.Helper()
	port, _ := serve(t, "http")
	return "http://127.0.0.1:" + port + "/mcp"
}

// Unix serves the fixture over Streamable HTTP on a unix socket at path
// (its MCP endpoint is /mcp there) until the test ends, and returns once
// it listens. It returns the server process, killed by its PID and reaped
// at the end of the test.
func Unix(t testing.TB, path string) *os.Process {
	t.Helper()
	_, p := serve(t, "unix", path)
	return p
}

// serve starts the fixture with args and returns what it said it listens
// on, and its process.
func serve(t testing.TB, args ...string) (string, *os.Process) {
	t.Helper()
	node, modules := prerequisites(t)
	cmd := exec.Command(node, append([]string{Script()}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
		close(port)
	}()
	select {
	case addr, ok := <-port:
		if !ok {
			t.Fatal("the modern fixture exited before listening")
		}
		return addr, cmd.Process
	case <-time.After(30 * time.Second):
		t.Fatal("the modern fixture did not listen within 30s")
	}
	return "", nil
}
