package scaleout

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// lab is the test's own network: a namespace for the balancer with a
// bridge at lbAddr, and one namespace per host on that bridge. Nothing of
// it is outside the namespaces the test made, and all of it goes when the
// test ends.
type lab struct {
	lb    string   // name of the balancer's namespace
	hosts []string // names of the hosts' namespaces
}

const (
	lbAddr = "10.231.0.1"
	subnet = "/24"
)

// hostAddr is the address of host i (0-based) on the bridge.
func hostAddr(i int) string { return fmt.Sprintf("10.231.0.%d", 11+i) }

// newLab makes the namespaces, the bridge and one veth pair per host.
func newLab(t testing.TB, hosts int) *lab {
	t.Helper()
	prefix := fmt.Sprintf("mgso%d", os.Getpid())
	l := &lab{lb: prefix + "lb"}
	addNetns(t, l.lb)
	run(t, "ip", "-n", l.lb, "link", "set", "lo", "up")
	run(t, "ip", "-n", l.lb, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", l.lb, "addr", "add", lbAddr+subnet, "dev", "br0")
	run(t, "ip", "-n", l.lb, "link", "set", "br0", "up")
	for i := range hosts {
		ns := fmt.Sprintf("%sh%d", prefix, i+1)
		addNetns(t, ns)
		l.hosts = append(l.hosts, ns)
		veth := fmt.Sprintf("vh%d", i+1)
		run(t, "ip", "-n", l.lb, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "-n", l.lb, "link", "set", veth, "master", "br0", "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		run(t, "ip", "-n", ns, "addr", "add", hostAddr(i)+subnet, "dev", "eth0")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	}
	return l
}

// addNetns makes a named network namespace, deleted when the test ends
// (after every process in it is gone: cleanups run last-in first-out).
func addNetns(t testing.TB, name string) {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
}

// run runs a command and fails the test if it fails.
func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// dialIn returns a DialContext that makes its sockets in the named
// network namespace: the test's clients reach the balancer and the hosts
// from inside the lab, and the test's own namespace gets no address.
func dialIn(t testing.TB, ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	target := openNetns(t, ns)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := inNetns(target, func() (err error) {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
}

// listenIn listens on addr in the named network namespace: a server the
// hosts reach on their own loopback.
func listenIn(t testing.TB, ns, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := inNetns(openNetns(t, ns), func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func openNetns(t testing.TB, ns string) *os.File {
	t.Helper()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	return target
}

// inNetns runs fn on a thread in the namespace target. A socket fn makes
// belongs to that namespace, and works wherever the thread is afterwards.
func inNetns(target *os.File, fn func() error) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", target.Name(), err)
	}
	err = fn()
	if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	} // else the thread stays locked and ends with the goroutine
	return err
}
