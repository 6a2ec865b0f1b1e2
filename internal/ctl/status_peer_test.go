package ctl

import (
	"bytes"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// A remote backend on a unix socket shows the server process behind it,
// with its command and the names of its uid and gid; one without shows no
// peer.
func TestPrintPeer(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	b := dbusapi.BackendStatus{Name: "w", State: "healthy", URL: "unix:/run/w.sock",
		PeerPID: uint32(os.Getpid()), PeerUID: uint32(os.Getuid()), PeerGID: uint32(os.Getgid())}
	var out bytes.Buffer
	printBackend(&out, b, now, false)
	comm, _ := os.ReadFile("/proc/self/comm")
	usr, _ := user.Current()
	grp, _ := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	want := fmt.Sprintf("        Peer: pid %d (%s), uid %d (%s), gid %d (%s)\n", os.Getpid(), strings.TrimSpace(string(comm)), os.Getuid(), usr.Username, os.Getgid(), grp.Name)
	if got := out.String(); !strings.Contains(got, want) {
		t.Errorf("got:\n%s\nwant %q", got, want)
	}
	out.Reset()
	b.PeerPID = 0
	printBackend(&out, b, now, false)
	if strings.Contains(out.String(), "Peer") {
		t.Errorf("got:\n%s\nwant no peer line for a backend on no unix socket", out.String())
	}
}
