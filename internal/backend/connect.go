package backend

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// connect starts the backend's connection: spawns the child, or prepares
// the session with the remote server. The handshake follows.
func (b *Backend) connect() (*Conn, error) {
	var conn *Conn
	if b.cfg.IsRemote() {
		r, err := newRemote(b)
		if err != nil {
			return nil, err
		}
		conn = newRemoteConn(b, r)
	} else {
		argv := append([]string{b.cfg.Command}, b.cfg.Args...) // placeholders kept: for logs
		childArgv, childEnv, err := childCommand(b.cfg, b.opts)
		if err != nil {
			return nil, err
		}
		proc, err := b.startChild(childArgv, childEnv)
		if err != nil {
			return nil, err
		}
		conn = newConn(b, proc)
		attrs := []any{"backend_pid", proc.id(), "command", strings.Join(argv, " "), journal.MessageSpawn.Attr()}
		if u := proc.unitName(); u != "" {
			attrs = append(attrs, "unit", u)
		}
		b.log.Info(fmt.Sprintf("spawned backend %q (pid %d)", b.name, proc.id()), attrs...)
	}
	b.mu.Lock()
	b.conn = conn
	b.publishLocked()
	b.mu.Unlock()
	conn.start()
	b.setState(Starting, func(st *Status) { st.PID = conn.PID() })
	if conn.remote != nil {
		b.log.Info(fmt.Sprintf("connecting to remote backend %q at %s", b.name, conn.URL()), "backend_url", conn.URL(), "transport", b.cfg.Transport)
	}
	return conn, nil
}

// abort ends the connection at once, without waiting: the child is killed
// (through its pidfd, never a reused pid), a remote session is dropped.
// Run then restarts it as after a crash.
func (c *Conn) abort() {
	if c.remote != nil {
		go c.remote.kill()
		return
	}
	c.proc.kill()
}

// ident is the log attribute that identifies the connection: the child's
// PID or the remote server's URL.
func (c *Conn) ident() slog.Attr {
	if c.remote != nil {
		return slog.String("backend_url", c.remote.url)
	}
	return slog.Int("backend_pid", c.proc.id())
}
