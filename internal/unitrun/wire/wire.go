// Package wire is what the daemon and backend-exec, the ExecStart= helper of
// mcpgate-backend@.service, say to each other on the daemon's backend
// socket: one message from the daemon with the server's command line,
// environment and working directory, carrying the three pipes that become
// the server's standard input, output and error; then the helper execs the
// server, which closes its end of the connection, or writes why it could
// not and exits.
//
// The message is a 4-byte big-endian length and that many bytes of JSON,
// with the pipes attached (SCM_RIGHTS) to its first byte. It never holds
// anything but what the server itself gets.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Socket is where mcpgated listens for backend-exec, in mcpgate.service's
// RuntimeDirectory=: reachable by every backend's dynamic user, unlike
// /run/mcpgate, and removed when the service stops. Only group
// SocketGroup may connect.
const Socket = "/run/mcpgate-backends/exec.sock"

// SocketGroup is the group the backend units run in (Group= of
// mcpgate-backend@.service), and the only one, besides mcpgated's user,
// that may connect to Socket.
const SocketGroup = "mcpgate-backend"

// MaxSpec bounds the JSON of a Spec: argv and environment, like the
// kernel's ARG_MAX for execve, plus room for the encoding.
const MaxSpec = 4 << 20

// Spec is what the server is started with.
type Spec struct {
	Argv []string `json:"argv"`
	// Env is added to the unit's own environment (its HOME, PATH, LANG,
	// caches and credentials directory), replacing variables of the same
	// name.
	Env []string `json:"env"`
	Dir string   `json:"dir,omitempty"`
}

// Send writes spec to conn with stdio (stdin, stdout, stderr: the ends the
// server uses) attached.
func Send(conn *net.UnixConn, spec Spec, stdio [3]*os.File) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if len(body) > MaxSpec {
		return fmt.Errorf("the command line and environment take %d bytes, more than the %d an exec allows", len(body), MaxSpec)
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	n, oobn, err := conn.WriteMsgUnix(msg, rights, nil)
	if err != nil {
		return err
	}
	if oobn != len(rights) {
		return errors.New("the pipes were not sent")
	}
	if n < len(msg) {
		_, err = conn.Write(msg[n:])
	}
	return err
}

// Receive reads the daemon's message from conn and returns the spec and
// the three files attached to it.
func Receive(conn *net.UnixConn) (Spec, [3]*os.File, error) {
	var spec Spec
	var files [3]*os.File
	head := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(head, oob)
	if err != nil {
		return spec, files, fmt.Errorf("read the daemon's message: %w", err)
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return spec, files, err
	}
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), []string{"stdin", "stdout", "stderr"}[i])
	}
	if _, err := io.ReadFull(conn, head[n:]); err != nil {
		return spec, files, fmt.Errorf("read the daemon's message: %w", err)
	}
	size := binary.BigEndian.Uint32(head)
	if size > MaxSpec {
		return spec, files, fmt.Errorf("the daemon's message is %d bytes, more than %d", size, MaxSpec)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return spec, files, fmt.Errorf("read the daemon's message: %w", err)
	}
	if err := json.Unmarshal(body, &spec); err != nil {
		return spec, files, fmt.Errorf("the daemon's message: %w", err)
	}
	if len(spec.Argv) == 0 {
		return spec, files, errors.New("the daemon's message has no command")
	}
	return spec, files, nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("the daemon's message: %w", err)
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return nil, fmt.Errorf("the daemon's message: %w", err)
		}
		fds = append(fds, got...)
	}
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("the daemon's message carries %d files, not the 3 pipes", len(fds))
	}
	return fds, nil
}
