package itest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// BenchmarkRawToolCall compares a tools/call in a 2025 session with a
// stateless 2026-07-28 one, both in raw HTTP over one keep-alive
// connection per client, through the real daemon (built without the race
// detector) to one child: the difference is the cost of the era. Besides
// the wall time, which other processes on the machine disturb, it reports
// the daemon's own CPU time per call (daemon-cpu-ns/op, from
// /proc/PID/stat, 10 ms ticks).
func BenchmarkRawToolCall(b *testing.B) {
	bins := testutil.BuildWithoutRace(b)
	toml, url := testutil.Config(b, strings.ReplaceAll("[backends.s]\ncommand = \"FAKE\"\n", "FAKE", bins.Fake))
	toml = strings.Replace(toml, `log_level = "debug"`, `log_level = "warn"`, 1)
	d := testutil.StartDaemon(b, toml, url, testutil.DaemonOptions{WithoutRace: true})
	payload := strings.Repeat("x", 1024)
	args := fmt.Sprintf(`"name":"s__echo","arguments":{"text":%q}`, payload)
	session := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + args + `}}`
	stateless := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` + args + `}}`
	run := func(b *testing.B, body string, header http.Header) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		cpu := cpuTime(b, d.PID)
		defer func() { b.ReportMetric(float64(cpuTime(b, d.PID)-cpu)/float64(b.N), "daemon-cpu-ns/op") }()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, d.URL, strings.NewReader(body))
			req.Header = header.Clone()
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(out), `"result"`) {
				b.Fatalf("HTTP %d: %s", resp.StatusCode, out)
			}
		}
	}
	base := http.Header{"Accept": {"application/json, text/event-stream"}, "Content-Type": {"application/json"}}
	b.Run("session", func(b *testing.B) {
		resp, _ := exchange(b, http.DefaultClient, d.URL, initializeBody)
		h := base.Clone()
		h.Set("Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"))
		h.Set("Mcp-Protocol-Version", "2025-06-18")
		run(b, session, h)
	})
	b.Run("stateless", func(b *testing.B) {
		h := base.Clone()
		h.Set("Mcp-Protocol-Version", "2026-07-28")
		h.Set("Mcp-Method", "tools/call")
		h.Set("Mcp-Name", "s__echo")
		run(b, stateless, h)
	})
}

// cpuTime returns the user and system CPU time pid used so far.
func cpuTime(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(data, ')')
	if err != nil || i < 0 {
		b.Fatalf("reading /proc/%d/stat: %v", pid, err)
	}
	f := strings.Fields(string(data[i+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
