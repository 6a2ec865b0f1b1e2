package backend

import "time"

// sessionEnded measures the session with the server that conn served
// since served (mcp.client.session.duration), once it ended: a server
// that died ended it with an error. A 2026-07-28 server has no session.
func (b *Backend) sessionEnded(conn *Conn, served time.Time, died bool) {
	t := b.opts.Telemetry
	if t == nil || conn.Modern() {
		return
	}
	var protocol string
	if server := conn.Server(); server != nil {
		protocol = server.ProtocolVersion
	}
	transport := "pipe"
	if conn.remote != nil {
		transport = "tcp"
	}
	errType := ""
	if died {
		errType = "unavailable"
	}
	t.ClientSessionEnded(served, protocol, transport, errType)
}
