package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
)

// TestMain makes the test binary backend-exec itself when asked to, so the
// tests run the real program.
func TestMain(m *testing.M) {
	if os.Getenv("MCPGATE_TEST_BACKEND_EXEC") == "1" {
		os.Unsetenv("MCPGATE_TEST_BACKEND_EXEC")
		main()
		return
	}
	os.Exit(m.Run())
}

// helper starts backend-exec against a socket of the test's and returns
// its end of the connection.
func helper(t *testing.T, extraEnv ...string) (*net.UnixConn, *exec.Cmd) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "exec.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(os.Args[0], "--socket="+sock, "demo")
	cmd.Env = append([]string{"MCPGATE_TEST_BACKEND_EXEC=1", "PATH=/usr/bin:/bin", "HOME=/unit/home"}, extraEnv...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, cmd
}

func pipes(t *testing.T) (ours, theirs [3]*os.File) {
	t.Helper()
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ours[i], theirs[i] = w, r
		} else {
			ours[i], theirs[i] = r, w
		}
		t.Cleanup(func() { r.Close(); w.Close() })
	}
	return ours, theirs
}

// TestExec: the server gets the pipes as its standard streams, the unit's
// environment with the daemon's additions, and the connection closes
// without a word once it runs.
func TestExec(t *testing.T) {
	conn, cmd := helper(t)
	ours, theirs := pipes(t)
	script := `echo "home=$HOME token=$TOKEN"; echo oops >&2; read line; echo "got $line"`
	if err := wire.Send(conn, wire.Spec{Argv: []string{"sh", "-c", script}, Env: []string{"TOKEN=s3cret"}, Dir: "/"}, theirs); err != nil {
		t.Fatal(err)
	}
	for _, f := range theirs {
		f.Close()
	}
	conn.CloseWrite()
	said, err := io.ReadAll(conn)
	if err != nil || len(said) != 0 {
		t.Fatalf("the helper said %q (%v) instead of closing on exec", said, err)
	}
	out := bufio.NewReader(ours[1])
	if line, _ := out.ReadString('\n'); line != "home=/unit/home token=s3cret\n" {
		t.Errorf("first line %q", line)
	}
	if line, _ := bufio.NewReader(ours[2]).ReadString('\n'); line != "oops\n" {
		t.Errorf("stderr %q", line)
	}
	io.WriteString(ours[0], "ping\n")
	if line, _ := out.ReadString('\n'); line != "got ping\n" {
		t.Errorf("answer %q", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("server: %v", err)
	}
}

// TestExecFails: a command that cannot run is reported to the daemon.
func TestExecFails(t *testing.T) {
	conn, cmd := helper(t)
	_, theirs := pipes(t)
	if err := wire.Send(conn, wire.Spec{Argv: []string{"no-such-server-xyz"}}, theirs); err != nil {
		t.Fatal(err)
	}
	conn.CloseWrite()
	said, _ := io.ReadAll(conn)
	if !strings.Contains(string(said), `exec no-such-server-xyz: not found in PATH "/usr/bin:/bin"`) {
		t.Errorf("the helper said %q", said)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the helper exited 0 after failing to exec")
	}
}
