// Command mcpgate-backend-exec is the ExecStart= of mcpgate-backend@.service,
// installed as /usr/libexec/mcpgate/backend-exec. It connects to mcpgated's
// backend socket, which knows it by the unit its process belongs to,
// receives the backend's command line, environment and standard streams,
// and execs the MCP server in its place: the server runs as the unit's main
// process, under the unit's user, sandbox and limits.
//
// Usage: backend-exec [--socket=PATH] INSTANCE
//
//	backend-exec --stopped INSTANCE
//
// With --stopped it is the template's ExecStopPost=: when the run failed
// it writes, to the unit's own journal, how the server ended and where its
// standard error went (mcpgated's journal), so that "systemctl status
// mcpgate-backend@NAME" says more than the exit status.
package main

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
)

func main() {
	socket := wire.Socket
	stopped := false
	var args []string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--socket="); ok {
			socket = v
			continue
		}
		if a == "--stopped" {
			stopped = true
			continue
		}
		args = append(args, a)
	}
	if len(args) != 1 {
		fail(2, "usage: backend-exec [--socket=PATH] INSTANCE (the ExecStart= of mcpgate-backend@.service), or backend-exec --stopped INSTANCE (its ExecStopPost=)")
	}
	instance := args[0]
	if stopped {
		if report := stoppedReport(instance, os.Getenv); report != "" {
			fmt.Println(report)
		}
		return
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		fail(1, "backend %s: cannot reach mcpgated at %s: %v (is mcpgate.service running? it starts this unit itself)", instance, socket, err)
	}
	spec, stdio, err := wire.Receive(conn)
	if err != nil {
		fail(1, "backend %s: %v", instance, err)
	}
	for i, f := range stdio {
		if err := unix.Dup2(int(f.Fd()), i); err != nil {
			fail(1, "backend %s: %v", instance, err)
		}
		f.Close()
	}
	if spec.Dir != "" {
		if err := os.Chdir(spec.Dir); err != nil {
			refuse(conn, instance, fmt.Sprintf("cwd %s: %v", spec.Dir, err))
		}
	}
	env := mergeEnv(withoutReserved(os.Environ()), spec.Env)
	path := spec.Argv[0]
	if !strings.Contains(path, "/") {
		if path, err = lookPath(path, env); err != nil {
			refuse(conn, instance, err.Error())
		}
	}
	// The connection is close-on-exec: mcpgated reads its end of file as
	// "the server runs".
	err = unix.Exec(path, spec.Argv, env)
	refuse(conn, instance, fmt.Sprintf("exec %s: %v", spec.Argv[0], err))
}

// refuse tells mcpgated why the server could not start, then exits.
func refuse(conn *net.UnixConn, instance, why string) {
	_, _ = conn.Write([]byte(why))
	fail(1, "backend %s: %s", instance, why)
}

// fail writes to the unit's journal (the helper's own stderr, which is
// the server's once it has been replaced) and exits.
func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "backend-exec: "+format+"\n", args...)
	os.Exit(code)
}

// withoutReserved returns env without the variables mcpgate.toml(5)
// reserves (config.ReservedEnv): systemd sets JOURNAL_STREAM for this
// helper, whose standard streams are the journal's, but the server's are
// mcpgated's pipes, and none of the others describe anything of the
// server's either.
func withoutReserved(env []string) []string {
	reserved := config.ReservedEnv()
	out := env[:0:0]
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(reserved, name) {
			out = append(out, kv)
		}
	}
	return out
}

// mergeEnv returns base, the unit's environment, with extra added,
// replacing variables of the same name.
func mergeEnv(base, extra []string) []string {
	set := make(map[string]bool, len(extra))
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !set[name] {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// lookPath finds file in the PATH of the server's environment, as
// exec.LookPath does in the daemon's.
func lookPath(file string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if st, err := os.Stat(p); err == nil && !st.IsDir() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in PATH %q", file, path)
}
