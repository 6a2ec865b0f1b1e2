package itest

import (
	"encoding/json"
	"strings"
	"testing"
)

// status_resources serves every backend's health as MCP resources; it is
// off by default.
func TestStatusResources(t *testing.T) {
	d := gatewayWith(t, "status_resources = true", `
[backends.up]
command = "FAKE"

[backends.down]
command = "FAKE"
enabled = false
`)
	c := newRawClient(t, d.URL)
	list := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`)
	for _, uri := range []string{"mcpgate://health", "mcpgate://backend/up", "mcpgate://backend/down"} {
		if !strings.Contains(list, `"uri":"`+uri+`"`) {
			t.Errorf("resources/list lacks %s: %s", uri, list)
		}
	}
	a := lastAnswer(t, c.post(t, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"mcpgate://health"}}`))
	var res struct {
		Contents []struct{ URI, MimeType, Text string }
	}
	if err := json.Unmarshal(a.Result, &res); err != nil || len(res.Contents) != 1 || res.Contents[0].MimeType != "application/json" {
		t.Fatalf("read mcpgate://health: %s %+v", a.Result, a.Error)
	}
	var health struct {
		Backends []struct {
			Name, State, Circuit, LastError string
			Restarts                        int
		}
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &health); err != nil || len(health.Backends) != 2 {
		t.Fatalf("health %s: %v", res.Contents[0].Text, err)
	}
	for _, b := range health.Backends {
		want := map[string]string{"up": "healthy", "down": "stopped"}[b.Name]
		if b.State != want || b.Circuit != "closed" {
			t.Errorf("backend %s: state %s circuit %s; want %s, closed", b.Name, b.State, b.Circuit, want)
		}
	}
	a = lastAnswer(t, c.post(t, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"mcpgate://backend/up"}}`))
	if a.Error != nil || !strings.Contains(string(a.Result), `\"name\":\"up\"`) || strings.Contains(string(a.Result), "stderr") {
		t.Errorf("read mcpgate://backend/up: %s %+v", a.Result, a.Error)
	}

	off := newRawClient(t, gateway(t, "[backends.up]\ncommand = \"FAKE\"\n").URL)
	if list := off.post(t, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`); strings.Contains(list, "mcpgate://") {
		t.Errorf("status resources listed while off: %s", list)
	}
}
