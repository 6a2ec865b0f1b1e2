package unitrun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// connectEnv makes the test binary a process that connects to the unix
// socket it names and exits (see TestMain).
const connectEnv = "MCPGATE_UNITRUN_TEST_CONNECT"

func TestMain(m *testing.M) {
	if path := os.Getenv(connectEnv); path != "" {
		conn, err := net.Dial("unix", path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conn.(*net.UnixConn).File() // keeps the connection open: only the exit closes it
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// processName stands for systemd's GetUnitByPID: what the process that
// has pid now is.
func processName(pid int32) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b)), err
}

// TestPeerPIDReuse confirms that a peer identified by its PID after the
// fact can be mistaken for another process: a peer connects and exits,
// its PID goes to another process (here a sleep, on the socket a backend
// unit being started), and a lookup by the PID from SO_PEERCRED names
// that one. identifyPeer, which pins the peer with a pidfd, refuses it.
func TestPeerPIDReuse(t *testing.T) {
	if last, err := os.ReadFile("/proc/sys/kernel/ns_last_pid"); err != nil || os.WriteFile("/proc/sys/kernel/ns_last_pid", last, 0) != nil {
		testutil.Unavailable(t, "cannot choose the next PID (root is needed for ns_last_pid): %v", err)
	}
	socket := filepath.Join(testutil.ShortTempDir(t), "peer.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	peer := exec.Command(os.Args[0])
	peer.Env = append(os.Environ(), connectEnv+"="+socket)
	peer.Stderr = os.Stderr
	if err := peer.Run(); err != nil { // connected, exited and reaped
		t.Fatalf("the connecting process: %v", err)
	}
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	raw, _ := conn.SyscallConn()
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred.Pid != int32(peer.Process.Pid) {
		t.Fatalf("SO_PEERCRED = %+v, %v; want PID %d", cred, err, peer.Process.Pid)
	}

	impostor := reusePID(t, cred.Pid)
	if name, err := processName(cred.Pid); err != nil || name != "sleep" {
		t.Fatalf("the reused PID %d names %q, %v; want the impostor", cred.Pid, name, err)
	}
	// The suspicion holds: the PID the kernel reported now names the
	// impostor, which is what a lookup by that PID alone would find.
	p, err := pinPeer(conn)
	if err == nil {
		defer p.close()
		var name string
		name, err = identifyPeer(p, processName)
		if err == nil {
			t.Fatalf("the exited peer was identified as %q (PID %d, now the impostor's, PID %d)", name, p.pid, impostor)
		}
	}
	if !errors.Is(err, errPeerGone) {
		t.Errorf("identifying the exited peer: %v, want %v", err, errPeerGone)
	}
}

// TestPeerIdentified: a live peer is identified by its PID.
func TestPeerIdentified(t *testing.T) {
	socket := filepath.Join(testutil.ShortTempDir(t), "peer.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	server, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	p, err := pinPeer(server)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	pid, err := identifyPeer(p, func(pid int32) (int32, error) { return pid, nil })
	if err != nil || pid != int32(os.Getpid()) || p.uid != uint32(os.Getuid()) {
		t.Errorf("identified PID %d uid %d, %v; want %d, %d", pid, p.uid, err, os.Getpid(), os.Getuid())
	}
}

// reusePID starts a sleep with PID pid (by setting ns_last_pid just
// below it, retried while other processes take it first) and returns
// its PID; it is killed and reaped when the test ends.
func reusePID(t *testing.T, pid int32) int {
	t.Helper()
	for range 1000 { // other processes, in containers too, take PIDs meanwhile
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(int(pid-1))), 0); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == int(pid) {
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
			})
			return cmd.Process.Pid
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatalf("could not start a process with PID %d", pid)
	return 0
}
