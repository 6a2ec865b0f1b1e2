package conformance

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// spec2026 is the revision whose frozen requirement set the suite 0.2.0
// runs, at that revision's (stateless) wire.
const spec2026 = "2026-07-28"

// needs2026Server lists the scenarios (or "scenario/check") of the
// 2026-07-28 set that cannot pass through mcpgate when its backend speaks
// only 2025-11-25, each with the 2026-only server feature it needs, or
// what a 2025 server cannot know. Every other scenario that passes
// directly against the fixture must pass through mcpgate in front of the
// fixture's 2025 mode (TestConformance2026, "2025 stdio backend"), one
// process shared by every scenario's calls, the abandoned ones too.
var needs2026Server = map[string]string{
	"input-required-result-basic-elicitation": "the scenario wants the input request under the key \"user_name\", " +
		"which a 2026 tool names in its InputRequiredResult; a 2025 server's elicitation/create has no key, so the gateway must make one up",
	"input-required-result-ignore-extra-params": "the scenario sends inputResponses without a first round or requestState and wants a " +
		"complete result: only a 2026 handler that reads inputResponses can complete from them; a 2025 server answers " +
		"only the requests it sent during a call",
	// The tasks extension is a 2026-07-28 server's: a 2025 server makes
	// tasks only for a 2025 session's task-augmented call, and mcpgated
	// turns neither era's tasks into the other's (mcpgated(8), Tasks).
	"tasks-lifecycle":              tasksNeed2026,
	"tasks-capability-negotiation": tasksNeed2026,
	"tasks-wire-fields":            tasksNeed2026,
	"tasks-request-state-removal":  tasksNeed2026,
	"tasks-mrtr-input":             tasksNeed2026,
	"tasks-request-headers":        tasksNeed2026,
	"tasks-dispatch-and-envelope":  tasksNeed2026,
	"tasks-mrtr-composition":       tasksNeed2026,
	// Not a 2026-only feature, but what a 2025 server knows of its
	// clients: the capabilities mcpgate declared at initialize, as the
	// 2026-07-28 _meta members of a request do not reach it.
	"input-required-result-capability-check": "the scenario wants the server to ask only for what the request " +
		"declares in its _meta; a 2025 server learns capabilities at initialize only (mcpgate declares all it can relay), " +
		"so it asks for elicitation the request did not declare, and mcpgate answers -32021 naming it",
}

// tasksNeed2026 is why a scenario of the tasks extension cannot pass
// through mcpgate in front of a 2025-only backend.
const tasksNeed2026 = "the io.modelcontextprotocol/tasks extension needs a 2026-07-28 server: the 2025 fixture creates no task " +
	"for a 2026 client, and mcpgated does not turn the extension into 2025 tasks"

// goSDKStdioDiffers is what the go-sdk fixture (a server of both eras over
// stdio, one process driven in 2026-07-28) does otherwise through mcpgate:
// SHOULD-level warnings, each a design decision of the gateway's, not a
// lost feature.
var goSDKStdioDiffers = map[string]string{
	"server-stateless/sep-2575-server-sends-tools-list-changed-on-subscription": "the fixture's trigger registers the " +
		"same tool again and announces list_changed each time; mcpgate re-reads the list, finds it unchanged and tells " +
		"no client (list_changed only when a client's view changed), so the scenario's second trigger announces nothing",
}

// TestConformance2026 runs the server scenarios that the MCP 2026-07-28
// revision requires (the suite's --requirements 2026-07-28, suite 0.2.0)
// against everything-server-2026, our fixture on the TypeScript SDK v2
// (packaging/npm/everything-server-2026.mjs):
//
//   - directly over HTTP, the baseline: every scenario the revision scores
//     must pass there;
//   - through mcpgate with the fixture as a remote 2026 backend (HTTP);
//   - through mcpgate with the fixture as a stdio backend;
//   - through mcpgate with the fixture as a stdio backend that speaks only
//     2025-11-25 (--stdio-2025): mcpgate serves 2026 clients in front of it;
//   - through mcpgate with the go-sdk fixture of the 2025 runs as a stdio
//     backend, against that fixture's own direct run. go-sdk v1.8.0 speaks
//     both eras; mcpgate probes it with server/discover and speaks 2026 to
//     its one process, which serves the 2025 runs too (conformance_test.go).
//
// Every check that passes directly must pass through mcpgate, except, in
// front of the 2025 backend, those of the scenarios in needs2026Server. tool_prefix is empty because the suite calls the
// fixture's tools and prompts by their names.
//
// It runs only with MCPGATE_CONFORMANCE=1; `make conformance` sets it.
func TestConformance2026(t *testing.T) {
	if os.Getenv("MCPGATE_CONFORMANCE") != "1" {
		t.Skip("MCP conformance suite not requested: set MCPGATE_CONFORMANCE=1 (make conformance does)")
	}
	tk := installTools(t)
	fixture := fixture2026(t)
	cli := []string{tk.suite2026, "server", "--requirements", spec2026}
	scored := scoredScenarios(t, tk.suite2026)

	var direct, directGo *suiteRun
	t.Run("direct", func(t *testing.T) {
		url := startFixture2026HTTP(t, tk.node, fixture)
		direct = runServerScenarios(t, tk.node, cli, "2026 direct", url, "")
		for _, name := range scored {
			if r, ok := direct.byName()[name]; !ok || !r.passed() {
				t.Errorf("scenario %s, required by %s, does not pass directly against the fixture", name, spec2026)
			}
		}
	})
	if direct == nil {
		t.Fatal("no direct baseline to compare with (the direct run failed)")
	}
	// The go-sdk fixture of the 2025 runs also speaks 2026-07-28 (go-sdk
	// v1.8.0 answers server/discover): its own baseline, for its leg.
	t.Run("go-sdk direct", func(t *testing.T) {
		directGo = runServerScenarios(t, tk.node, cli, "2026 direct, go-sdk fixture", startGoFixture2026HTTP(t, tk.fixture), "")
	})

	gateways := []struct {
		name   string
		base   *suiteRun
		start  func(t *testing.T) string
		exempt map[string]string
		flags  []string // more of the suite's options for this leg
	}{
		{"remote 2026 backend", direct, func(t *testing.T) string {
			return startRemoteGateway(t, startFixture2026HTTP(t, tk.node, fixture))
		}, nil, nil},
		{"stdio 2026 backend", direct, func(t *testing.T) string {
			return startStdioGateway(t, tk.node, fixture, "--stdio", "")
		}, nil, nil},
		{"2025 stdio backend", direct, func(t *testing.T) string {
			return startStdioGateway(t, tk.node, fixture, "--stdio-2025", "") // shared by every scenario's calls
		}, needs2026Server, []string{"--timeout", "5000"}}, // its task scenarios, exempted, would wait out the suite's 30s each
		{"go-sdk stdio backend", directGo, func(t *testing.T) string {
			return startGateway(t, tk.fixture)
		}, goSDKStdioDiffers, nil},
	}
	runs := []*suiteRun{direct, directGo}
	var mu sync.Mutex
	// The legs through mcpgate go side by side, each with a gateway and
	// a fixture of its own: their scenarios mostly wait (for tasks, for
	// timeouts), not compute.
	t.Run("through mcpgate", func(t *testing.T) {
		for _, g := range gateways {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				if g.base == nil {
					t.Skip("no direct baseline to compare with (its direct run failed)")
				}
				run := runServerScenarios(t, tk.node, append(cli[:len(cli):len(cli)], g.flags...), "2026 through mcpgate, "+g.name, g.start(t), "")
				mu.Lock()
				runs = append(runs, run)
				mu.Unlock()
				lost, notes := checkRegressions(g.base, run, g.exempt)
				for _, msg := range lost {
					t.Error(msg)
				}
				for _, msg := range notes {
					t.Log("not a regression: " + msg)
				}
			})
		}
	})
	for _, run := range runs {
		if run == nil {
			continue
		}
		t.Log(run.summary() + fmt.Sprintf(" (%d checks pass)", run.successCount()))
	}
}

// fixture2026 returns the path of everything-server-2026.mjs as deps.sh
// installs it, beside the SDK packages it imports.
func fixture2026(t *testing.T) string {
	t.Helper()
	path := filepath.Join(testutil.CacheDir(), "npm", "everything-server-2026.mjs")
	if _, err := os.Stat(path); err != nil {
		testutil.Unavailable(t, "the 2026-07-28 fixture is not installed (run packaging/ci/deps.sh, which make check runs): %v", err)
	}
	return path
}

// startFixture2026HTTP starts the fixture serving HTTP on a free loopback
// port and returns its MCP endpoint URL once it answers.
func startFixture2026HTTP(t *testing.T, node, fixture string) string {
	t.Helper()
	return startHTTPServer(t, "everything-server-2026", func(addr string) *exec.Cmd {
		return exec.Command(node, fixture, "--http", addr)
	})
}

// startGoFixture2026HTTP starts the go-sdk fixture serving stateless HTTP,
// its default and what 2026-07-28 clients need (startFixtureHTTP serves
// sessions for the 2025 runs).
func startGoFixture2026HTTP(t *testing.T, fixtureBin string) string {
	t.Helper()
	return startHTTPServer(t, "everything-server", func(addr string) *exec.Cmd {
		return exec.Command(fixtureBin, "-http", addr)
	})
}

// startHTTPServer starts the server that command makes for a free loopback
// address and returns its /mcp URL once it answers.
func startHTTPServer(t *testing.T, name string, command func(addr string) *exec.Cmd) string {
	t.Helper()
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		addr := freeLoopbackAddr(t)
		p := startProc(t, name, command(addr), filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, attempt)))
		url := "http://" + addr + "/mcp"
		err := awaitHTTP(t.Context(), url, p, 30*time.Second)
		if err == nil {
			t.Logf("%s (pid %d) serves %s", name, p.cmd.Process.Pid, url)
			return url
		}
		if out := p.output(); p.exited() && attempt < 3 && (strings.Contains(out, "EADDRINUSE") || strings.Contains(out, "address already in use")) {
			continue // lost the race for the port; take another
		}
		t.Fatalf("start %s: %v\noutput:\n%s", name, err, p.output())
	}
}

// startStdioGateway starts mcpgated with the fixture, run by node with
// mode, as its only backend over stdio, with the backend keys extra, and
// returns its endpoint's URL.
func startStdioGateway(t *testing.T, node, fixture, mode, extra string) string {
	t.Helper()
	toml, url := testutil.Config(t, fmt.Sprintf(`[backends.everything]
command = %q
args = [%q, %q]
tool_prefix = ""
relay_client_requests = true
%s`, node, fixture, mode, extra))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	t.Logf("mcpgated (pid %d) serves %s with backend %s %s", d.PID, url, fixture, mode)
	return url
}

// scoredScenarios reads the server scenarios the suite's frozen
// requirement set for spec2026 scores (the "server:" list of
// requirements/2026-07-28.yaml in the suite's package).
func scoredScenarios(t *testing.T, suiteJS string) []string {
	t.Helper()
	path := filepath.Join(filepath.Dir(suiteJS), "..", "requirements", spec2026+".yaml")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("read the suite's requirement set: %v", err)
	}
	defer f.Close()
	var names []string
	inServer := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "server:":
			inServer = true
		case inServer && strings.HasPrefix(line, "  - "):
			names = append(names, strings.TrimSpace(strings.TrimPrefix(line, "  - ")))
		case line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			inServer = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("%s lists no server scenario", path)
	}
	return names
}

// checkRegressions lists every check that succeeds in base but not in
// other (lost), outside the scenarios named in exempt. Checks are told
// apart by scenario and check id; a check id that occurs n times
// successfully in a scenario of base must succeed n times in other. A
// check that is INFO in other instead (the suite's "optional, not
// exercised", e.g. SSE when the server answers with JSON) is in notes.
// An exempt key is a scenario's name, or "scenario/check" for one check.
func checkRegressions(base, other *suiteRun, exempt map[string]string) (lost, notes []string) {
	got := other.byName()
	for _, r := range base.Scenarios {
		if _, ok := exempt[r.Name]; ok {
			continue
		}
		o, ran := got[r.Name]
		if !ran {
			o.Missing = "the scenario did not run"
		}
		var ids []string
		for _, c := range r.Checks {
			if c.Status == statusSuccess && !slices.Contains(ids, c.ID) {
				ids = append(ids, c.ID)
			}
		}
		for _, id := range ids {
			if _, ok := exempt[r.Name+"/"+id]; ok {
				continue
			}
			want, have := successes(r, id, statusSuccess), successes(o, id, statusSuccess)
			if have >= want {
				continue
			}
			msg := fmt.Sprintf("%s/%s passes %s but not %s: %s", r.Name, id, base.Target, other.Target, failureOf(o, id))
			if have+successes(o, id, statusInfo) >= want {
				notes = append(notes, msg)
			} else {
				lost = append(lost, msg)
			}
		}
	}
	return lost, notes
}

// successes counts the checks id of r with status.
func successes(r scenarioResult, id, status string) int {
	n := 0
	for _, c := range r.Checks {
		if c.ID == id && c.Status == status {
			n++
		}
	}
	return n
}

// failureOf says how check id ended in r, for the regression message.
func failureOf(r scenarioResult, id string) string {
	if r.Missing != "" {
		return r.Missing
	}
	for _, c := range r.Checks {
		if c.ID == id && c.Status != statusSuccess {
			if c.ErrorMessage == "" {
				return fmt.Sprintf("%s: %s", c.Status, c.Description)
			}
			return fmt.Sprintf("%s: %s", c.Status, c.ErrorMessage)
		}
	}
	return "check not reported"
}

func (s *suiteRun) successCount() int {
	n := 0
	for _, r := range s.Scenarios {
		n += r.count(statusSuccess)
	}
	return n
}
