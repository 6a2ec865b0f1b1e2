// Package dbustest runs a private dbus-daemon for a test.
package dbustest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Binary is the dbus-daemon Start runs.
const Binary = "dbus-daemon"

// Options choose the kind of bus.
type Options struct {
	// System makes a bus with <type>system</type> and the system bus's
	// default policy (nobody may own names, method calls are denied unless
	// a policy file allows them), plus the policy files in Include. Without
	// it, the bus is session-like: everything is allowed.
	System  bool
	Include []string
}

// Bus is one running private dbus-daemon.
type Bus struct {
	Address string // e.g. unix:path=/tmp/mg123/bus,guid=…
	Dir     string // a directory readable by every user, holding the socket
	PID     int
	Stderr  *testutil.Buffer
}

const sessionPolicy = `
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>`

// systemPolicy is the default policy of Debian's system.conf.
const systemPolicy = `
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>`

// Start runs dbus-daemon --nofork --print-address on a fresh unix socket in
// a directory every user can enter (so that tests may connect as another
// uid), and returns once it prints its address. The process is killed and
// reaped by PID when the test ends. The test is skipped when dbus-daemon
// is not installed.
func Start(t testing.TB, opts Options) *Bus {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		testutil.Unavailable(t, "%s is not installed: %v", Binary, err)
	}
	dir := testutil.ShortTempDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "bus")
	var conf strings.Builder
	conf.WriteString(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
`)
	if opts.System {
		conf.WriteString("  <type>system</type>\n")
	} else {
		conf.WriteString("  <type>session</type>\n")
	}
	fmt.Fprintf(&conf, "  <listen>unix:path=%s</listen>\n  <auth>EXTERNAL</auth>\n", socket)
	if opts.System {
		conf.WriteString(systemPolicy)
	} else {
		conf.WriteString(sessionPolicy)
	}
	for _, inc := range opts.Include {
		fmt.Fprintf(&conf, "\n  <include>%s</include>", inc)
	}
	conf.WriteString("\n</busconfig>\n")
	confPath := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := &Bus{Dir: dir, Stderr: &testutil.Buffer{}}
	cmd := exec.Command(bin, "--config-file="+confPath, "--nofork", "--nopidfile", "--print-address")
	cmd.Stdout = w
	cmd.Stderr = b.Stderr
	testutil.Start(t, cmd)
	w.Close()
	b.PID = cmd.Process.Pid

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case b.Address = <-lines:
	case <-time.After(30 * time.Second):
		r.Close()
		t.Fatalf("dbus-daemon printed no address within 30s; stderr:\n%s", b.Stderr.String())
	}
	if b.Address == "" {
		t.Fatalf("dbus-daemon exited without printing its address; stderr:\n%s", b.Stderr.String())
	}
	return b
}
