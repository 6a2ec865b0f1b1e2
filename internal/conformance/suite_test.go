package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// Check statuses as written by the suite into checks.json.
const (
	statusSuccess = "SUCCESS"
	statusFailure = "FAILURE"
	statusWarning = "WARNING"
	statusInfo    = "INFO"
)

// tools are the installed test tools, as reported by packaging/conformance/setup.sh.
type tools struct {
	node    string // Node 22 binary
	suite   string // the conformance CLI, dist/index.js
	fixture string // go-sdk everything-server binary
	// suite2026 is the conformance CLI 0.2.0, which runs the 2026-07-28
	// requirement set (see conformance2026_test.go).
	suite2026 string
}

// installTools runs setup.sh (idempotent and cached; the first run downloads
// from the npm registry and the Go module proxy) and returns what it reports.
func installTools(t *testing.T) tools {
	t.Helper()
	script := filepath.Join(packageDir(t), "..", "..", "packaging", "conformance", "setup.sh")
	dir := t.TempDir()
	var stdout bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stdout = &stdout
	p := startProc(t, "setup.sh", cmd, filepath.Join(dir, "setup.log"))
	if code := p.wait(t, 15*time.Minute); code != 0 {
		t.Fatalf("%s exited %d:\n%s", script, code, p.output())
	}
	var tk tools
	for _, line := range strings.Split(stdout.String(), "\n") {
		key, value, _ := strings.Cut(line, "=")
		switch key {
		case "node":
			tk.node = value
		case "suite":
			tk.suite = value
		case "fixture":
			tk.fixture = value
		case "suite2026":
			tk.suite2026 = value
		}
	}
	if tk.node == "" || tk.suite == "" || tk.fixture == "" || tk.suite2026 == "" {
		t.Fatalf("%s did not report node=, suite=, suite2026= and fixture= paths; stdout:\n%s", script, stdout.String())
	}
	return tk
}

// startFixtureHTTP starts the fixture serving Streamable HTTP on a free
// loopback port and returns its MCP endpoint URL once it answers.
//
// -stateless=false: the fixture defaults to stateless HTTP, where a server
// cannot send requests to the client, so the sampling and elicitation
// scenarios would fail; mcpgate keeps sessions, so the stateful mode is the
// fair baseline (go-sdk's own scripts/server-conformance.sh does the same).
func startFixtureHTTP(t *testing.T, fixtureBin string) string {
	t.Helper()
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		addr := freeLoopbackAddr(t)
		cmd := exec.Command(fixtureBin, "-http", addr, "-stateless=false")
		p := startProc(t, "everything-server", cmd, filepath.Join(dir, fmt.Sprintf("fixture-%d.log", attempt)))
		url := "http://" + addr + "/mcp"
		err := awaitHTTP(t.Context(), url, p, 15*time.Second)
		if err == nil {
			t.Logf("fixture %s (pid %d) serves %s", fixtureBin, p.cmd.Process.Pid, url)
			return url
		}
		if p.exited() && attempt < 3 && strings.Contains(p.output(), "address already in use") {
			continue // lost the race for the port; take another
		}
		t.Fatalf("start fixture: %v\nfixture output:\n%s", err, p.output())
	}
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// scenarioResult is the outcome of one scenario of one suite run.
type scenarioResult struct {
	Name   string
	Checks []check
	// Missing says why there are no checks (the scenario crashed inside the
	// suite, which then writes no checks.json); it counts as a failure.
	Missing string
}

// passed reports whether the scenario passed: it has checks and none is a
// FAILURE. WARNINGs do not fail a scenario here (they do for the suite's
// --expected-failures bookkeeping; see expected-failures.yml).
func (r scenarioResult) passed() bool {
	return r.Missing == "" && r.count(statusFailure) == 0
}

func (r scenarioResult) count(status string) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// verdict is the one-word outcome shown in tables.
func (r scenarioResult) verdict() string {
	switch {
	case !r.passed():
		return "FAIL"
	case r.count(statusWarning) > 0:
		return "pass (warn)"
	default:
		return "pass"
	}
}

// suiteRun is the outcome of one run of the suite against one target.
type suiteRun struct {
	Target    string
	Scenarios []scenarioResult // in the order the suite ran them
	ExitCode  int
}

func (s *suiteRun) passCount() int {
	n := 0
	for _, r := range s.Scenarios {
		if r.passed() {
			n++
		}
	}
	return n
}

func (s *suiteRun) byName() map[string]scenarioResult {
	m := make(map[string]scenarioResult, len(s.Scenarios))
	for _, r := range s.Scenarios {
		m[r.Name] = r
	}
	return m
}

// summary is the count line, e.g. "direct: 30/30 scenarios pass".
func (s *suiteRun) summary() string {
	return fmt.Sprintf("%s: %d/%d scenarios pass", s.Target, s.passCount(), len(s.Scenarios))
}

// table renders one line per scenario and, below, every FAILURE and WARNING
// with the suite's error message.
func (s *suiteRun) table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "SCENARIO\tRESULT\tSUCCESS\tFAILURE\tWARNING\n")
	for _, r := range s.Scenarios {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", r.Name, r.verdict(),
			r.count(statusSuccess), r.count(statusFailure), r.count(statusWarning))
	}
	w.Flush()
	for _, r := range s.Scenarios {
		if r.Missing != "" {
			fmt.Fprintf(&b, "%s: FAILURE: %s\n", r.Name, r.Missing)
		}
		for _, c := range r.Checks {
			if c.Status == statusFailure || c.Status == statusWarning {
				fmt.Fprintf(&b, "%s: %s %s: %s", r.Name, c.Status, c.ID, c.Description)
				if c.ErrorMessage != "" {
					fmt.Fprintf(&b, ": %s", c.ErrorMessage)
				}
				b.WriteString("\n")
			}
		}
	}
	fmt.Fprintf(&b, "%s (suite exit code %d)\n", s.summary(), s.ExitCode)
	return b.String()
}

// runSuite runs the server scenarios of suite ("active" or "pending")
// against url and collects every scenario's checks. expectedFailures, when
// not empty, is passed to the suite as --expected-failures and the suite's
// exit code must then be 0.
func runSuite(t *testing.T, tk tools, suite, target, url, expectedFailures string) *suiteRun {
	t.Helper()
	return runServerScenarios(t, tk.node, []string{tk.suite, "server", "--suite", suite}, target, url, expectedFailures)
}

// runServerScenarios runs the suite's command line cli (the CLI's script,
// "server" and the options choosing the scenarios) against url; see runSuite.
func runServerScenarios(t *testing.T, node string, cli []string, target, url, expectedFailures string) *suiteRun {
	t.Helper()
	dir := t.TempDir()
	results := filepath.Join(dir, "results")
	args := append(cli[:len(cli):len(cli)], "--url", url, "--output-dir", results)
	if expectedFailures != "" {
		args = append(args, "--expected-failures", expectedFailures)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	p := startProc(t, "conformance suite", cmd, filepath.Join(dir, "suite.log"))
	code := p.wait(t, 10*time.Minute)
	if code != 0 && code != 1 {
		t.Fatalf("conformance suite against %s exited %d (crashed?):\n%s", url, code, p.output())
	}
	scenarios, err := readResults(p.output(), results)
	if err != nil {
		t.Fatalf("read suite results for %s: %v\nsuite output:\n%s", target, err, p.output())
	}
	run := &suiteRun{Target: target, Scenarios: scenarios, ExitCode: code}
	t.Logf("%s results (suite output: %s):\n%s", target, p.logPath, run.table())
	if expectedFailures != "" && code != 0 {
		t.Errorf("suite exited %d with --expected-failures %s: a scenario failed or warned that is not listed there, "+
			"or a listed one now passes. Update the file from the table above.\nSuite output:\n%s",
			code, expectedFailures, p.output())
	}
	return run
}

var (
	// scenarioLine is how the suite announces each scenario on stdout: of
	// a run of many, or the one of --scenario NAME.
	scenarioLine = regexp.MustCompile(`^(?:=== Running scenario: (\S+) ===|Running client scenario '(\S+)' against server: .*)$`)
	// resultDirName is "server-<scenario>-<ISO timestamp with : and . as ->".
	resultDirName = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)
)

// readResults pairs the scenarios announced in the suite's output with the
// checks.json files under resultsDir. A scenario without checks.json (the
// suite writes none when the scenario throws) gets a Missing reason.
func readResults(suiteOutput, resultsDir string) ([]scenarioResult, error) {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(suiteOutput))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := scenarioLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			names = append(names, m[1]+m[2])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read suite output: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("suite output announces no scenario")
	}
	entries, err := os.ReadDir(resultsDir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	dirs := make(map[string]string)
	for _, e := range entries {
		if m := resultDirName.FindStringSubmatch(e.Name()); e.IsDir() && m != nil {
			dirs[m[1]] = filepath.Join(resultsDir, e.Name())
		}
	}
	results := make([]scenarioResult, 0, len(names))
	for _, name := range names {
		r := scenarioResult{Name: name}
		dir, ok := dirs[name]
		if !ok {
			r.Missing = "no result directory (scenario did not run to the end; see suite output)"
			results = append(results, r)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "checks.json"))
		if os.IsNotExist(err) {
			r.Missing = "no checks.json (scenario threw inside the suite; see suite output)"
			results = append(results, r)
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &r.Checks); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "checks.json"), err)
		}
		if len(r.Checks) == 0 {
			r.Missing = "checks.json lists no check"
		}
		results = append(results, r)
	}
	return results, nil
}

// regressions lists every scenario that passes in base but not in other.
func regressions(base, other *suiteRun) []string {
	got := other.byName()
	var out []string
	for _, r := range base.Scenarios {
		if !r.passed() {
			continue
		}
		o, ok := got[r.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s passes %s but did not run %s", r.Name, base.Target, other.Target))
		case !o.passed():
			out = append(out, fmt.Sprintf("%s passes %s but fails %s", r.Name, base.Target, other.Target))
		}
	}
	return out
}
