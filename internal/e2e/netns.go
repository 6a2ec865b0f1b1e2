package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// DialContext connects to addr as a process in the container would: TCP and
// UDP sockets are created inside the container's network namespace (so
// 127.0.0.1:7431 is the container's loopback, not the host's), and a unix
// socket path is resolved in the container's file system (see Path). It
// suits http.Transport.DialContext and MCP client transports.
//
// A socket belongs to the network namespace it was created in, whatever
// thread uses it later; so the dialing goroutine locks its OS thread, enters
// the container's namespace with setns(2), dials, and switches back before
// unlocking. If switching back fails, the thread stays locked and the Go
// runtime ends it with the goroutine, so no other goroutine ever runs in the
// wrong namespace.
func (c *Container) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "unix", "unixgram", "unixpacket":
		var d net.Dialer
		return d.DialContext(ctx, network, c.Path(addr))
	}
	type dialed struct {
		conn net.Conn
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		conn, restored, err := c.dialInNetns(ctx, network, addr)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- dialed{conn, err}
	}()
	d := <-done
	return d.conn, d.err
}

// dialInNetns dials from the calling thread after moving it into the
// container's network namespace. restored says whether the thread is back in
// its own namespace.
func (c *Container) dialInNetns(ctx context.Context, network, addr string) (conn net.Conn, restored bool, err error) {
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("dial %s in container %s: %w", addr, c.name, err)
	}
	defer own.Close()
	target, err := os.Open("/proc/" + strconv.Itoa(c.initPID) + "/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("dial %s in container %s: %w", addr, c.name, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("dial %s in container %s: setns: %w", addr, c.name, err)
	}
	var d net.Dialer
	conn, dialErr := d.DialContext(ctx, network, addr)
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, false, fmt.Errorf("dial %s in container %s: returning to the host namespace: %w", addr, c.name, err)
	}
	if dialErr != nil {
		return nil, true, fmt.Errorf("dial %s in container %s: %w", addr, c.name, dialErr)
	}
	return conn, true, nil
}
