package journal

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

func TestParseMCPLog(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   MCPLog
		err    bool
	}{
		{`{"level":"error","logger":"db","data":"connection lost"}`,
			MCPLog{Level: "error", SlogLevel: 8, Priority: 3, Logger: "db", Message: "connection lost"}, false},
		{`{"level":"info","data":{"a": 1, "b": [true, null]}}`,
			MCPLog{Level: "info", Priority: 6, Message: `{"a":1,"b":[true,null]}`}, false},
		{`{"level":"debug","data":"two\nlines"}`,
			MCPLog{Level: "debug", SlogLevel: -4, Priority: 7, Message: "two\nlines"}, false},
		{`{"level":"emergency","data":42}`,
			MCPLog{Level: "emergency", SlogLevel: LevelEmergency, Priority: 0, Message: "42"}, false},
		{`{"level":"notice"}`, MCPLog{Level: "notice", SlogLevel: LevelNotice, Priority: 5}, false},
		{`{"level":"shout","data":null}`, MCPLog{Level: "shout", Priority: 6}, false},
		{`["not", "an object"]`, MCPLog{}, true},
		{`{"level": 3}`, MCPLog{}, true},
	} {
		got, err := ParseMCPLog(json.RawMessage(tc.params))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseMCPLog(%s) = %+v, %v; want %+v, error %v", tc.params, got, err, tc.want, tc.err)
		}
	}
}

// TestMCPMessageJournald writes notifications/message params of every level
// through a BackendLog to a real journald.
func TestMCPMessageJournald(t *testing.T) {
	j, w := realJournal(t)
	bl := NewBackendLog(w, BackendLogOptions{Backend: "mcp", Instance: "2", PID: 77})
	levels := []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
	for _, l := range levels {
		bl.MCPMessage(json.RawMessage(`{"level":"` + l + `","logger":"lg-` + l + `","data":"level ` + l + `"}`))
	}
	bl.MCPMessage(json.RawMessage(`{"level":"info","data":{"k":"v", "n": [1, 2]}}`))
	bl.MCPMessage(json.RawMessage(`not json`))
	bl.Close()

	got := j.AwaitMatch(t, len(levels)+2, journaldtest.Entry{"MCPGATE_BACKEND": "mcp"})
	for i, l := range levels {
		e := got[i]
		if e["PRIORITY"] != strconv.Itoa(7-i) || e["MESSAGE"] != "level "+l || e["MCPGATE_LOGGER"] != "lg-"+l {
			t.Errorf("level %s: %v", l, e)
		}
		if e["SYSLOG_IDENTIFIER"] != "mcpgate-mcp" || e["MCPGATE_INSTANCE"] != "2" || e["MCPGATE_BACKEND_PID"] != "77" {
			t.Errorf("level %s: %v", l, e)
		}
	}
	obj := got[len(levels)]
	if obj["MESSAGE"] != `{"k":"v","n":[1,2]}` || obj["PRIORITY"] != "6" {
		t.Errorf("object data: %v", obj)
	}
	if _, ok := obj["MCPGATE_LOGGER"]; ok {
		t.Errorf("MCPGATE_LOGGER without a logger: %v", obj)
	}
	if bad := got[len(levels)+1]; bad["MESSAGE"] != "not json" || bad["PRIORITY"] != "6" {
		t.Errorf("unparsable params: %v", bad)
	}
}
