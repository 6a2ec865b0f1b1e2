package backend

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testing/modernserver"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// serveSDKUnix serves srv over Streamable HTTP on a unix socket in a
// temporary directory until the test ends, and returns the socket's path.
func serveSDKUnix(t *testing.T, srv *mcp.Server) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "mcp.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return socket
}

// A remote backend on a unix socket (url = "unix:SOCKET:PATH") is the
// same Streamable HTTP client in both eras: a 2025 session with the Go
// SDK, with a server-to-client request during a call and its health
// checks, and a 2026-07-28 server (the TypeScript SDK v2 fixture), probed
// as modern; each shows the peer credentials of the process behind the
// socket, and its socket path rather than a URL.
func TestRemoteBackendOnUnixSocket(t *testing.T) {
	t.Run("2025-11-25 session", func(t *testing.T) {
		socket := serveSDKUnix(t, sdkServer())
		cfg := remoteConfig("unix:" + socket + ":/mcp")
		cfg.Health.HealthInterval = 50 * time.Millisecond
		cfg.Health.HealthTimeout = 5 * time.Second
		cfg.Health.FailureThreshold = 3
		r := runRemote(t, cfg, "")
		st := r.await(t, "healthy", healthy)
		if st.URL != "unix:"+socket || st.Server == nil || st.Server.Name != "sdk-peer" || r.b.Conn().Modern() {
			t.Errorf("status = %+v; want URL unix:%s and the 2025 server sdk-peer", st, socket)
		}
		res, err := r.call(t, "echo", `{"text":"over a socket"}`)
		if err != nil || !strings.Contains(string(res), "over a socket") {
			t.Fatalf("echo = %s, %v", res, err)
		}
		res, err = r.call(t, "sample", `{}`)
		if err != nil || !strings.Contains(string(res), "sampled") {
			t.Fatalf("sample = %s, %v", res, err)
		}
		testutil.Eventually(t, wait, "a health check", func() bool { return !r.b.Health().LastCheck.IsZero() })
		if h := r.b.Health(); !h.LastCheckOK {
			t.Errorf("health %+v; want the check passed", h)
		}
		// The server is this test's process.
		peer, ok := r.b.Peer()
		if !ok || peer.PID != uint32(os.Getpid()) || peer.UID != uint32(os.Getuid()) || peer.GID != uint32(os.Getgid()) {
			t.Errorf("Peer() = %+v, %v; want pid %d uid %d gid %d", peer, ok, os.Getpid(), os.Getuid(), os.Getgid())
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		socket := filepath.Join(t.TempDir(), "modern.sock")
		proc := modernserver.Unix(t, socket)
		r := runRemote(t, remoteConfig("unix:"+socket+":/mcp"), "")
		r.await(t, "healthy", healthy)
		if !r.b.Conn().Modern() {
			t.Fatal("the 2026-07-28 server on a unix socket is not modern")
		}
		res, err := r.call(t, "echo", `{"text":"modern socket"}`)
		if err != nil || !strings.Contains(string(res), "echo: modern socket") {
			t.Fatalf("echo = %s, %v", res, err)
		}
		if peer, ok := r.b.Peer(); !ok || peer.PID != uint32(proc.Pid) {
			t.Errorf("Peer() = %+v, %v; want the fixture's pid %d", peer, ok, proc.Pid)
		}
	})
}

// A backend whose socket is not there fails to start with an error that
// names the socket, and has no peer.
func TestRemoteBackendUnixSocketMissing(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "absent.sock")
	cfg := remoteConfig("unix:" + socket + ":/mcp")
	cfg.MaxRestarts = 0
	r := runRemote(t, cfg, "")
	st := r.await(t, "failed", func(s Status) bool { return s.State == Failed })
	if !strings.Contains(st.LastError, socket) {
		t.Errorf("LastError = %q; want it to name the socket %s", st.LastError, socket)
	}
	if _, ok := r.b.Peer(); ok {
		t.Error("a backend that never connected has a peer")
	}
}
