package itest

import (
	"encoding/json"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// backendStatus reads the status resource of backend name.
func backendStatus(t *testing.T, c *rawClient, name string) (st struct {
	State            string   `json:"state"`
	ServedByFallback []string `json:"servedByFallback"`
}) {
	t.Helper()
	a := lastAnswer(t, c.post(t, `{"jsonrpc":"2.0","id":"s","method":"resources/read","params":{"uri":"mcpgate://backend/`+name+`"}}`))
	var res struct {
		Contents []struct{ Text string } `json:"contents"`
	}
	if a.Error != nil || json.Unmarshal(a.Result, &res) != nil || len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &st) != nil {
		t.Fatalf("status of %s: %+v %s", name, a.Error, a.Result)
	}
	return st
}

// A backend that failed for good (max_restarts = 0, killed) keeps the
// tools its fallback can serve listed, marked in its status, and their
// calls go to the fallback instead of failing as unknown tools.
func TestFallbackServesAFailedBackend(t *testing.T) {
	d := gatewayWith(t, "status_resources = true", `
[backends.a]
command = "FAKE"
fallback = ["b"]
max_restarts = 0

[backends.b]
command = "FAKE"
`)
	cs := d.Connect(t, nil)
	child := testutil.FakeProcess(t, cs, "a__pid")
	c := newRawClient(t, d.URL)
	if err := syscall.Kill(child.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "backend a failed", func() bool {
		return backendStatus(t, c, "a").State == "failed"
	})
	if !testutil.ToolNames(t, cs)["a__echo"] {
		t.Error("a__echo left the catalog although its fallback b serves it")
	}
	if st := backendStatus(t, c, "a"); !slices.Contains(st.ServedByFallback, "a__echo") {
		t.Errorf("status of a: servedByFallback = %v; want a__echo in it", st.ServedByFallback)
	}
	a := lastAnswer(t, c.post(t, callBody(1, "a__echo", `{"text":"via b"}`)))
	if a.Error != nil {
		t.Fatalf("a__echo after a failed: %+v; want b's answer", a.Error)
	}
	var res struct {
		Meta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(a.Result, &res); err != nil || res.Meta["io.mcpgate/servedBy"] != "b" {
		t.Errorf("result %s; want _meta io.mcpgate/servedBy = b", a.Result)
	}
}
