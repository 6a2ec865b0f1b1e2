package backend

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// handshake is a legacy shell child's side of the MCP handshake: it
// answers the server/discover probe (id 1) as a 2025 server does, with
// -32601, and initialize (id 2) with no capabilities, so no list is
// fetched.
const handshake = `read -r line
echo '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}'
read -r line
echo '{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}'
`

// runBackend supervises a shell child until the test ends, recording every
// status, and returns once it is healthy.
func runBackend(t *testing.T, script string) (*Backend, *testutil.Recorder[Status]) {
	t.Helper()
	b := testBackend(t, "sh", "-c", handshake+script)
	b.cfg.Timeout = time.Second
	b.cfg.MaxRestarts = 0
	b.opts.GracePeriod = 100 * time.Millisecond
	var statuses testutil.Recorder[Status]
	b.opts.OnChange = func(b *Backend) { statuses.Add(b.Status()) }
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	<-b.Settled()
	if b.Conn() == nil {
		t.Fatalf("backend did not become healthy: %+v", b.Status())
	}
	return b, &statuses
}

// A child that neither answers the ping nor writes anything is killed.
func TestProbeKillsASilentChild(t *testing.T) {
	b, statuses := runBackend(t, "exec cat >/dev/null")
	conn := b.Conn()
	b.Probe(conn)
	select {
	case <-conn.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the silent child was not killed: %+v", statuses.All())
	}
	if conn.exit.Signal != "SIGKILL" {
		t.Errorf("the child ended with %s; want SIGKILL", conn.exit.Text)
	}
	if !statuses.Within(30*time.Second, func(sts []Status) bool {
		return len(sts) > 0 && sts[len(sts)-1].State == Failed
	}) {
		t.Errorf("statuses %+v; want the backend failed (max_restarts 0)", statuses.All())
	}
}

// A child busy writing for other calls is alive, even if its ping is stuck
// behind its work: it is kept, and healthy again after the probe.
func TestProbeSparesABusyChild(t *testing.T) {
	b, statuses := runBackend(t, `while :; do
echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"busy"}}'
sleep 0.05
done`)
	conn := b.Conn()
	b.Probe(conn)
	var found int
	if !statuses.Within(30*time.Second, testutil.Index(0, func(st Status) bool { return st.State == Unhealthy }, &found)) {
		t.Fatal("the probe did not start")
	}
	if !statuses.Within(30*time.Second, testutil.Index(found+1, func(st Status) bool { return st.State != Unhealthy }, &found)) {
		t.Fatal("the probe did not end")
	}
	if st := statuses.All()[found]; st.State != Healthy {
		t.Errorf("after the probe the backend is %s (%s); want healthy", st.State, st.LastError)
	}
	select {
	case <-conn.Done():
		t.Errorf("the busy child was killed: %s", conn.exit.Text)
	default:
	}
}

// The probe's signal goes through the child's pidfd: once the child is
// reaped, killing it signals nobody, even if its pid was reused.
func TestKillNeverSignalsAReapedChild(t *testing.T) {
	proc, err := spawn([]string{"true"}, nil, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	proc.stdin.Close()
	proc.stdout.Close()
	proc.stderr.Close()
	proc.wait()
	if err := proc.kill(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill after reaping = %v; want os.ErrProcessDone", err)
	}
}

// A probe of a child that was replaced meanwhile touches neither the new
// child nor the state.
func TestProbeOfAReplacedChildDoesNothing(t *testing.T) {
	b, _ := runBackend(t, "exec cat >/dev/null")
	old := b.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	b.Probe(old)
	if st := b.Status(); st.State != Healthy || st.PID == old.PID() {
		t.Errorf("after probing the old child the backend is %s with pid %d (old %d); want healthy with a new child", st.State, st.PID, old.PID())
	}
}
