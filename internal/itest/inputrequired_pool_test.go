package itest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// pooledInputGateway runs mcpgated with clients alice and bob and two
// backends with instance = "session" that speak 2025-11-25: ded (up to
// three instances) and brief (one instance, whose calls wait 300ms for
// their client's retry). Each fake server records what it reads in
// dedRecord or briefRecord and is named by its --name in its command line.
func pooledInputGateway(t *testing.T) (gw *inputGW, dedRecord, briefRecord string) {
	t.Helper()
	bins := testutil.Build(t)
	dir := t.TempDir()
	dedRecord, briefRecord = filepath.Join(dir, "ded.jsonl"), filepath.Join(dir, "brief.jsonl")
	backends := fmt.Sprintf(`
[backends.ded]
command = %[1]q
args = ["--name", "ded", "--record", %[2]q]
instance = "session"
pool_min_idle = 1
pool_max = 3
pool_replenish_delay = "100ms"

[backends.brief]
command = %[1]q
args = ["--name", "brief", "--record", %[3]q]
instance = "session"
pool_min_idle = 0
pool_max = 1
pool_acquire_timeout = "30s"
client_request_timeout = "300ms"

[clients.alice]
token_sha256 = %[4]q

[clients.bob]
token_sha256 = %[5]q
`, bins.Fake, dedRecord, briefRecord, sha256Hex(aliceToken), sha256Hex(bobToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	return &inputGW{d: testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})}, dedRecord, briefRecord
}

// instancePIDs returns the daemon's living children that are instances of
// the fake server started with --name name.
func instancePIDs(gw *inputGW, name string) []int {
	var out []int
	for _, pid := range children(gw.d) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.Contains(cmdline, []byte("\x00--name\x00"+name+"\x00")) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestInputRequiredPooledInstances: on a backend with instance =
// "session", each stateless call that asks its client for input keeps its
// own instance until it ends, so that two clients' calls waiting at once
// both complete (on one shared process the second backend request could
// not be told apart from the first's); a call whose client never retries
// is cancelled when client_request_timeout passes, and its instance is
// stopped and its pool slot returned.
func TestInputRequiredPooledInstances(t *testing.T) {
	gw, _, briefRecord := pooledInputGateway(t)
	seen := map[int]bool{}
	note := func(name string) {
		for _, pid := range instancePIDs(gw, name) {
			seen[pid] = true
		}
	}

	t.Run("two clients at once", func(t *testing.T) {
		args := func(who string) string {
			return fmt.Sprintf(`{"requests":[{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"prompt of %s"}}],"maxTokens":1}}]}`, who)
		}
		answer := func(who string) string {
			return fmt.Sprintf(`{"role":"assistant","content":{"type":"text","text":"answer of %s"},"model":"m"}`, who)
		}
		a := gw.call(t, aliceToken, 1, "ded__requests", args("alice"), samplingCaps, "")
		aliceKey := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"]
		b := gw.call(t, bobToken, 1, "ded__requests", args("bob"), samplingCaps, "")
		bobKey := mustInputRequired(t, b, "sampling/createMessage")["sampling/createMessage"]
		if !strings.Contains(b.raw, "prompt of bob") {
			t.Errorf("bob was asked %s; want his own call's prompt", b.raw)
		}
		note("ded")
		if n := len(instancePIDs(gw, "ded")); n < 2 {
			t.Errorf("%d instances of ded run while two calls wait for their clients; want one each", n)
		}
		// bob answers first, alice after: each call gets its own client's answer.
		for _, r := range []struct {
			who, token, key, state string
		}{{"bob", bobToken, bobKey, b.Result.RequestState}, {"alice", aliceToken, aliceKey, a.Result.RequestState}} {
			res := gw.call(t, r.token, 2, "ded__requests", args(r.who), samplingCaps, retryParams(map[string]string{r.key: answer(r.who)}, r.state))
			if res.Error != nil || res.Result.ResultType != "complete" || !strings.Contains(string(res.Result.StructuredContent), "answer of "+r.who) {
				t.Errorf("%s's retry: HTTP %d %s; want the call's result with %s's answer", r.who, res.status, res.raw, r.who)
			}
		}
	})

	t.Run("abandoned", func(t *testing.T) {
		var pid int
		testutil.Eventually(t, 30*time.Second, "brief's one instance", func() bool {
			pids := instancePIDs(gw, "brief")
			if len(pids) == 1 {
				pid = pids[0]
			}
			return len(pids) == 1
		})
		seen[pid] = true
		a := gw.call(t, aliceToken, 3, "brief__sample", `{}`, samplingCaps, "")
		key := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"]
		// Alice never retries: when client_request_timeout passes, the
		// call is cancelled at its instance, which is stopped after.
		awaitRecorded(t, briefRecord, "the abandoned call's cancellation", `"notifications/cancelled"`, "did not retry within")
		testutil.Eventually(t, 30*time.Second, "the abandoned call's instance to stop", func() bool { return !alive(pid) })
		late := gw.call(t, aliceToken, 4, "brief__sample", `{}`, samplingCaps,
			retryParams(map[string]string{key: `{"role":"assistant","content":{"type":"text","text":"late"},"model":"m"}`}, a.Result.RequestState))
		mustRefuse(t, late, "expired")
		// The pool's one slot is free again: a fresh instance serves.
		res := gw.call(t, bobToken, 5, "brief__echo", `{"text":"after the abandoned call"}`, `{}`, "")
		if res.Error != nil || !strings.Contains(res.text(), "after the abandoned call") {
			t.Errorf("a call after the abandoned one: HTTP %d %s; want the pool to serve it", res.status, res.raw)
		}
		note("brief")
	})

	note("ded")
	note("brief")
	gw.d.Terminate(t)
	for pid := range seen {
		if alive(pid) {
			t.Errorf("instance %d still runs after the daemon stopped", pid)
		}
	}
}
