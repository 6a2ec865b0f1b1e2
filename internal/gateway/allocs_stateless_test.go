package gateway_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// inProcessGateway runs a gateway in this process in front of the fake
// server as backend "s", settled and with its catalog built. Everything
// stops when the test ends.
func inProcessGateway(t testing.TB) *gateway.Gateway {
	t.Helper()
	bins := testutil.Build(t)
	reg := &swappable{}
	log := slog.New(slog.DiscardHandler)
	g := gateway.New(reg, gateway.Options{Logger: log})
	cfg := &config.Backend{Name: "s", Enabled: true, Transport: "stdio", Command: bins.Fake, Args: []string{"--name", "s"},
		ToolPrefix: "s__", Timeout: time.Minute, RelayClientRequests: true}
	b := backend.New(cfg, backend.Options{GracePeriod: time.Second, MaxMessageBytes: 64 << 20, Handler: g, Logger: log})
	reg.b = b
	runBackend(t, b)
	t.Cleanup(g.Close) // cleanups run last first: the gateway closes before the backend stops
	g.Refresh()
	return g
}

// statelessCall is a 2026-07-28 tools/call with a 1 KiB argument.
func statelessCall(t testing.TB) *jsonrpc.Message {
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 1024) + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// anonymous is the client of the stateless requests: made once, as the
// front's identification does for each client.
var anonymous = access.Anonymous()

// statelessRoundTrip answers msg as the front does a stateless request:
// its head scanned once, a context for the request, the answer, End.
func statelessRoundTrip(t testing.TB, g *gateway.Gateway, msg *jsonrpc.Message) []byte {
	head := gateway.ScanHead(msg.Params)
	s := g.StatelessRequest(gateway.RequestMeta{Protocol: "2026-07-28", Capabilities: head.Capabilities, Head: head}, anonymous, "")
	defer s.End()
	return roundTrip(t, s, msg)
}

// Allocation budget of a stateless tools/call through the gateway: what a
// session's call costs (TestToolCallAllocationBudget), plus the
// request's own context. A change that allocates more fails here.
func TestStatelessToolCallAllocationBudget(t *testing.T) {
	g := inProcessGateway(t)
	msg := statelessCall(t)
	resp := statelessRoundTrip(t, g, msg)
	if !strings.Contains(string(resp), `"id":7,`) || !strings.Contains(string(resp), `"resultType":"complete"`) || !strings.Contains(string(resp), strings.Repeat("x", 1024)) {
		t.Fatalf("answer %s", resp)
	}
	const budget = 22
	got := testing.AllocsPerRun(200, func() { statelessRoundTrip(t, g, msg) })
	t.Logf("%.1f allocations per stateless tools/call (budget %d)", got, budget)
	if got > budget {
		t.Errorf("a stateless tools/call allocates %.1f times, over its budget of %d", got, budget)
	}
}

// BenchmarkStatelessToolCallInProcess is BenchmarkToolCallInProcess for
// stateless requests, beside a session's, in the same process and
// window: their cpu-ns/op compare the eras' cost in the gateway.
func BenchmarkStatelessToolCallInProcess(b *testing.B) {
	g := inProcessGateway(b)
	s, _, err := g.NewSession(nil, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	session := &jsonrpc.Message{JSONRPC: "2.0", ID: []byte(`7`), Method: "tools/call",
		Params: []byte(`{"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 1024) + `"}}`)}
	stateless := statelessCall(b)
	for round := range 2 {
		_ = round
		b.Run("session", func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				roundTrip(b, s, session)
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
		b.Run("stateless", func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				statelessRoundTrip(b, g, stateless)
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
