package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// envArtefacts names the directory where TestCockpitPage keeps its
// screenshots, in a directory per release (default dist/e2e-artefacts
// under the checkout).
const envArtefacts = "MCPGATE_E2E_ARTEFACTS"

// cockpitPage is the page's address in cockpit-ws, outside Cockpit's shell
// frame: the page alone, as the shell would load it into its iframe.
const cockpitPage = "/cockpit/@localhost/mcpgate/index.html"

// cockpitConfig is the drop-in of TestCockpitPage: the fake server, which
// writes to stderr on demand, and a real npm server.
var cockpitConfig = fmt.Sprintf(`# Written by internal/e2e (TestCockpitPage).
[gateway]
runner = "process"

[backends.fake]
command = %q
args = ["--name", "fake", "--stderr-at-start", %q, "--tools-file", %q]

[backends.everything]
command = "/usr/local/bin/mcp-server-everything"
args = ["stdio"]

[profiles.find]
description = "every tool, found by search"
search = true
`, fakeBin, fakeStartLine, integrityToolsFile)

// cockpitPolkitRule grants the page's operator (group mcpgate-admin) every
// action: managing backends, approving integrity changes and tokens.
const cockpitPolkitRule = `polkit.addRule(function(action, subject) {
    if ((action.id == "org.mcpgate.Gateway1.manage" || action.id == "org.mcpgate.Gateway1.approve" ||
         action.id == "org.mcpgate.Gateway1.tokens") &&
        subject.isInGroup("mcpgate-admin")) {
        return polkit.Result.YES;
    }
});
`

// cockpitConf lets cockpit-ws serve plain HTTP: the browser reaches it
// through the test's forwarder on the host's loopback.
const cockpitConf = "[WebService]\nAllowUnencrypted = true\n"

// Users of the page: an operator whom polkit grants
// org.mcpgate.Gateway1.manage and .approve (group mcpgate-admin, see
// cockpitPolkitRule) and who reads the journal (adm), and a viewer who is
// neither. Root may not log in to Cockpit (/etc/cockpit/disallowed-users).
const (
	cockpitAdmin    = "gwadmin"
	cockpitViewer   = "gwviewer"
	cockpitPassword = "e2e-Cockpit-pw-1"
)

// TestCockpitPage installs mcpgate and mcpgate-cockpit in the booted
// container beside Debian's cockpit-ws, and drives the page with headless
// Chromium on the host. The operator sees both backends with their state,
// the listeners, sessions and clients connected, and the client the test
// made with its session; creates a token for it, shown once, which the
// gateway lets in, and revokes it, after which the gateway refuses it;
// restarts one and sees its new PID and the tool
// change it brought; reviews and approves that change; sees a line the fake
// server writes to stderr appear in the journal view, coloured as an error,
// with a link to the same journal in Cockpit's Logs page; sees the call in
// the plot; reloads, which adds a backend that the page
// shows. The viewer gets the page read-only, its restart, reload and token
// refused with the reason, and a note that the system journal is not theirs to read. No
// step logs a console error; the page is photographed wide and narrow.
func TestCockpitPage(t *testing.T) {
	Require(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		testutil.Unavailable(t, "chromium is not installed (packaging/ci/deps.sh installs it): %v", err)
	}
	r, g, deb := bootInstalled(t)
	cockpitDebs, _ := filepath.Glob(filepath.Join(filepath.Dir(deb), "mcpgate-cockpit_*_all.deb"))
	if len(cockpitDebs) != 1 {
		t.Fatalf("no single mcpgate-cockpit_*_all.deb beside %s (make deb builds both): %v", deb, cockpitDebs)
	}
	g.c.CopyFile(t, cockpitDebs[0], "/root/mcpgate-cockpit.deb", 0o644)
	p := &cockpitCheck{g: g, chromium: chromium, artefacts: artefactDir(t)}
	// The browser reaches cockpit-ws (port 9090 in the container's network
	// namespace) through a port of the host's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fw := forward(ln, func(ctx context.Context) (net.Conn, error) {
		return g.c.DialContext(ctx, "tcp", "127.0.0.1:9090")
	})
	t.Cleanup(fw.close)
	p.base = "http://" + ln.Addr().String()

	r.step("c1-install", g.checkInstall)
	r.step("c2-cockpit", p.checkSetup)
	r.step("c3-operator", p.checkOperator)
	r.step("c4-viewer", p.checkViewer)
}

type cockpitCheck struct {
	g         *installedGateway
	chromium  string
	artefacts string
	base      string // http://127.0.0.1:PORT, forwarded to cockpit-ws
}

// artefactDir is where screenshots go, made if need be: one directory per
// release, as the runs of both go side by side.
func artefactDir(t *testing.T) string {
	dir := os.Getenv(envArtefacts)
	if dir == "" {
		dir = filepath.Join(testutil.ModuleRoot(), "dist", "e2e-artefacts")
	}
	dir = filepath.Join(dir, Release(t))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkSetup installs the Cockpit package, configures the gateway, the
// users and cockpit-ws, starts the gateway through its first client and
// forwards a port of the host's loopback to cockpit-ws.
func (p *cockpitCheck) checkSetup(t *testing.T) string {
	c := p.g.c
	res, err := c.Exec(t.Context(), nil, "dpkg", "-i", "/root/mcpgate-cockpit.deb")
	if err != nil {
		t.Fatalf("dpkg -i mcpgate-cockpit: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e.toml", []byte(cockpitConfig), 0o644)
	c.WriteFile(t, "/etc/polkit-1/rules.d/40-mcpgate-e2e.rules", []byte(cockpitPolkitRule), 0o644)
	c.WriteFile(t, integrityToolsFile, []byte(integrityToolsBefore), 0o644)
	c.WriteFile(t, "/etc/cockpit/cockpit.conf", []byte(cockpitConf), 0o644)
	c.Run(t, "groupadd", "--system", "mcpgate-admin")
	c.Run(t, "useradd", "--create-home", "--groups", "mcpgate-admin,adm", cockpitAdmin)
	c.Run(t, "useradd", "--create-home", cockpitViewer)
	c.RunInput(t, cockpitAdmin+":"+cockpitPassword+"\n"+cockpitViewer+":"+cockpitPassword+"\n", "chpasswd")
	c.Run(t, "systemctl", "start", "cockpit.socket")

	// The first client starts the gateway; its session stays open to call
	// the fake server's stderr tool later.
	p.g.token = c.Run(t, "mcpgatectl", "token", "create", "e2e")
	p.connect(t)

	version := c.Run(t, "dpkg-query", "-W", "-f=${Version}", "cockpit-ws")
	return fmt.Sprintf("mcpgate-cockpit installed; cockpit-ws %s at %s", version, p.base)
}

func (p *cockpitCheck) connect(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	hc := p.g.c.HTTPClient()
	hc.Transport = bearerTransport{token: p.g.token, next: hc.Transport}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gatewayURL, HTTPClient: hc, MaxRetries: -1}, testutil.LegacySession())
	if err != nil {
		t.Fatalf("MCP client: %v", err)
	}
	p.g.client = cs
}

// checkOperator: the operator sees every backend healthy, restarts the fake
// one and sees its PID change to the one busctl reports, follows its journal
// and sees a line the server writes to stderr, and photographs the page.
func (p *cockpitCheck) checkOperator(t *testing.T) string {
	b := p.browser(t, cockpitAdmin)
	for _, name := range []string{"fake", "everything"} {
		b.await(t, fmt.Sprintf("backend %s healthy", name), stateIs(name, "healthy"))
	}
	b.await(t, "the client e2e with its token's hash", `(() => {
		const row = document.querySelector('#clients tr[data-client="e2e"]');
		return row && row.textContent.includes("token sha256:");
	})()`)
	b.await(t, "the profiles, with the tools each serves and what its tools/list costs", `(() => {
		const all = document.querySelector('#profiles tr[data-profile=""]');
		const find = document.querySelector('#profiles tr[data-profile="find"]');
		const bytes = row => row.querySelector('[data-field="bytes"]').textContent;
		return all && find && find.textContent.includes("search") && find.textContent.includes("every tool, found by search") &&
			all.querySelector('[data-field="tools"]').textContent === find.querySelector('[data-field="tools"]').textContent &&
			/B$/.test(bytes(all)) && /B$/.test(bytes(find));
	})()`)
	b.await(t, "the operator's access note", `!document.body.classList.contains("read-only")`)
	// A counter systemd does not know (no memory controller here) is
	// shown as unknown, not as the largest uint64 in MiB.
	if mem := b.eval(t, fieldText("fake", "memory")); mem != "–" && !regexp.MustCompile(`^[0-9]{1,4}(\.[0-9])? (B|KiB|MiB|GiB)$`).MatchString(mem) {
		t.Errorf("the fake backend's memory reads %q", mem)
	}
	p.checkGatewayPanel(t, b)
	tokens := p.checkTokens(t, b)
	oldPID := p.mainPID(t, "fake")
	b.await(t, "the fake backend's PID "+oldPID, fieldIs("fake", "pid", oldPID))

	// The server changes a tool's description; the restart brings the
	// change, which the packaged integrity = "pin" holds back for review.
	p.g.c.WriteFile(t, integrityToolsFile, []byte(integrityToolsAfter), 0o644)
	b.run(t, "restart", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="restart"]`)))
	b.await(t, "a new PID", fmt.Sprintf(`(() => { const pid = %s; return pid !== "" && pid !== "–" && pid !== %q; })()`,
		fieldText("fake", "pid"), oldPID))
	b.await(t, "backend fake healthy again", stateIs("fake", "healthy"))
	newPID := p.mainPID(t, "fake")
	b.await(t, "the PID busctl reports, "+newPID, fieldIs("fake", "pid", newPID))

	b.await(t, "the pending change", fieldIs("fake", "pending", "tool search: changed since it was approved (held back)"))
	b.await(t, "no review for a backend without changes", `document.querySelector('[data-backend="everything"] .review').offsetParent === null`)
	b.run(t, "diff", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="diff"]`)))
	b.await(t, "the diff", `document.querySelector('[data-backend="fake"] pre.diff').textContent.includes("/etc/shadow")`)
	review := p.screenshot(t, b, "cockpit-review.png", 1280, 900, false)

	// The server changes again after the page showed the diff: approving
	// what the page showed approves nothing, the page says so, and the
	// unseen change stays pending.
	p.g.c.WriteFile(t, integrityToolsFile, []byte(integrityToolsLater), 0o644)
	p.g.c.Run(t, "mcpgatectl", "restart", "fake")
	jctx, jcancel := context.WithTimeout(t.Context(), time.Minute)
	defer jcancel()
	if _, err := p.g.c.AwaitJournal(jctx, func(e JournalEntry) bool {
		return e["MESSAGE_ID"] == journal.MessageIntegrityChange.String() && strings.Contains(e["MCPGATE_DIFF"], "/root/.ssh/id_rsa")
	}, "--unit=mcpgate.service"); err != nil {
		t.Fatalf("the second change was not journaled: %v", err)
	}
	b.await(t, "backend fake healthy after the second change", stateIs("fake", "healthy"))
	b.run(t, "approve what was shown", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="approve"]`)))
	b.await(t, "the refusal of a stale approval", `document.getElementById("message").textContent.includes("changed after it was reviewed")`)
	b.await(t, "the change still pending", fieldIs("fake", "pending", "tool search: changed since it was approved (held back)"))
	if tools := p.g.c.Run(t, "mcpgatectl", "integrity", "list"); !strings.Contains(tools, "search") {
		t.Errorf("after the refused approval, integrity list is %q", tools)
	}
	b.run(t, "approve without a diff shown", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="approve"]`)))
	b.await(t, "the advice to show the diff", `document.getElementById("message").textContent.includes("show the diff first")`)
	b.run(t, "diff again", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="diff"]`)))
	b.await(t, "the new diff", `document.querySelector('[data-backend="fake"] pre.diff').textContent.includes("/root/.ssh/id_rsa")`)
	b.run(t, "approve", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="approve"]`)))
	b.await(t, "no pending change", fieldIs("fake", "pending", "none"))

	b.run(t, "journal", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="journal"]`)))
	b.await(t, "the start line in the journal view", logHas(fakeStartLine))
	line := "cockpit-e2e-" + randomHex(6)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// "<3>" makes the line an error (PRIORITY=3) in the journal; the page
	// colours it so.
	if _, err := p.g.client.CallTool(ctx, &mcp.CallToolParams{Name: "fake__stderr", Arguments: map[string]any{"text": "<3>" + line}}); err != nil {
		t.Fatalf("tools/call fake__stderr: %v", err)
	}
	b.await(t, "the stderr line "+line+" in the journal view", logHas(line))
	p.checkLogsLink(t, b, "fake")
	b.await(t, "the line coloured as an error", fmt.Sprintf(`[...document.querySelectorAll("#log .p3")].some(e => e.textContent.endsWith(%q))`, ": "+line))
	b.await(t, "the call counted", fmt.Sprintf(`Number(%s) >= 1`, fieldText("fake", "calls")))
	b.await(t, "the call in the plot", `(() => {
		const legend = document.querySelector('[data-backend="fake"] .legend');
		return legend && /peak [0-9.]+\/s/.test(legend.textContent) && !legend.textContent.includes("peak 0.00/s");
	})()`)

	// A reload that adds a backend: its card appears, from the bus's
	// signals, and goes live.
	p.g.c.WriteFile(t, "/etc/mcpgate/conf.d/e2e-added.toml", []byte(addedConfig), 0o644)
	b.run(t, "reload", chromedp.Click(chromedp.CSS("#reload")))
	b.await(t, "the reload's result", `document.getElementById("reload-result").textContent.startsWith("last reload: ok")`)
	b.await(t, "the added backend healthy", stateIs("added", "healthy"))

	wide := p.screenshot(t, b, "cockpit-wide.png", 1280, 900, false)
	narrow := p.screenshot(t, b, "cockpit-narrow.png", 390, 844, true)
	b.noConsoleErrors(t)
	// Last, since it leaves the page for Cockpit's own.
	p.checkLogsPage(t, b, "fake", line)
	return fmt.Sprintf("both backends healthy; listeners, sessions and clients shown; %s; restart: PID %s -> %s; change reviewed, changed again, stale approval refused, reviewed again and approved; stderr line seen in the journal view; Logs link checked and its page shows the line; added backend shown; screenshots %s, %s, %s",
		tokens, oldPID, newPID, review, wide, narrow)
}

// checkViewer: a user without org.mcpgate.Gateway1.manage sees the page
// read-only, and a restart from it is refused with the gateway's reason;
// the backend keeps its process.
func (p *cockpitCheck) checkViewer(t *testing.T) string {
	b := p.browser(t, cockpitViewer)
	b.await(t, "backend fake healthy", stateIs("fake", "healthy"))
	b.await(t, "the read-only note", `document.body.classList.contains("read-only") && document.getElementById("access").textContent.startsWith("Read-only")`)
	pid := p.mainPID(t, "fake")
	b.run(t, "restart", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="restart"]`)))
	b.await(t, "the refusal", `document.getElementById("message").textContent.includes("refused")`)
	msg := b.eval(t, `document.getElementById("message").textContent`)
	if !strings.Contains(msg, accessDenied) {
		t.Errorf("the refusal %q does not name %s", msg, accessDenied)
	}
	if now := p.mainPID(t, "fake"); now != pid {
		t.Errorf("the refused restart changed the PID from %s to %s", pid, now)
	}
	b.run(t, "reload", chromedp.Click(chromedp.CSS("#reload")))
	b.await(t, "the reload refused", `document.getElementById("reload-result").textContent.startsWith("last reload: failed") &&
		document.getElementById("message").textContent.startsWith("Reload refused: ")`)
	if reload := b.eval(t, `document.getElementById("message").textContent`); !strings.Contains(reload, accessDenied) {
		t.Errorf("the reload's refusal %q does not name %s", reload, accessDenied)
	}
	tokenRefusal := p.checkViewerTokens(t, b)
	// The journal is journald's to guard: the viewer, outside adm and
	// systemd-journal, is told why the view stays empty.
	b.run(t, "journal", chromedp.Click(chromedp.CSS(`[data-backend="fake"] button[data-action="journal"]`)))
	b.await(t, "the note on the journal", logHas("Only members of adm and systemd-journal read the system journal"))
	shot := p.screenshot(t, b, "cockpit-viewer.png", 1280, 900, false)
	b.noConsoleErrors(t)
	return fmt.Sprintf("read-only; restart refused: %q; token refused: %q; screenshot %s", msg, tokenRefusal, shot)
}

// mainPID is the backend's MainPID as busctl reads it in the container.
func (p *cockpitCheck) mainPID(t *testing.T, name string) string {
	t.Helper()
	out := p.g.c.Run(t, "busctl", "get-property", busName, busPath+"/backend/"+name, backendIf, "MainPID")
	return strings.TrimPrefix(out, "u ")
}

func (p *cockpitCheck) screenshot(t *testing.T, b *browser, file string, width, height int64, mobile bool) string {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	b.run(t, "resize to "+file, chromedp.EmulateViewport(width, height, opts...))
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot %s: %v", file, err)
	}
	path := filepath.Join(p.artefacts, file)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// JavaScript conditions on the page.

func fieldText(backend, field string) string {
	return fmt.Sprintf(`((document.querySelector('[data-backend=%q] [data-field=%q]') || {}).textContent || "")`, backend, field)
}

func fieldIs(backend, field, want string) string {
	return fmt.Sprintf(`%s === %q`, fieldText(backend, field), want)
}

func stateIs(backend, state string) string { return fieldIs(backend, "state", state) }

func logHas(text string) string {
	return fmt.Sprintf(`document.getElementById("log").textContent.includes(%q)`, text)
}

// browser is one headless Chromium with one user logged in to Cockpit and
// the page open, collecting console errors.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// browser starts Chromium, logs user in and opens the page; t.Cleanup
// ends Chromium and waits for it.
func (p *cockpitCheck) browser(t *testing.T, user string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(p.chromium),
		chromedp.NoSandbox, // as root on the host
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium leaves its singleton socket's directory in $TMPDIR.
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &browser{ctx: ctx}
	// Console starts the browser and subscribes at once; the goroutine ends
	// with the context, which the cleanups below cancel first.
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	b.run(t, "log in as "+user,
		chromedp.Navigate(p.base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-user-input")),
		chromedp.SendKeys(chromedp.CSS("#login-user-input"), user),
		chromedp.SendKeys(chromedp.CSS("#login-password-input"), cockpitPassword),
		chromedp.Click(chromedp.CSS("#login-button")),
		// The login page reloads into the shell once cockpit-ws accepted.
		chromedp.WaitNotPresent(chromedp.CSS("#login-user-input")),
	)
	// Errors count from here: Cockpit's shell, which the login leads to,
	// is not ours.
	if list := b.errorList(); list != "" {
		t.Logf("before the page, the shell reported (not counted):%s", list)
	}
	b.mu.Lock()
	b.errors = nil
	b.mu.Unlock()
	b.run(t, "open the page", chromedp.Navigate(p.base+cockpitPage))
	return b
}

// run runs actions, failing the test after a minute.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v%s", what, err, b.errorList())
	}
}

// await waits for a JavaScript condition to hold on the page: Chromium
// evaluates it on every animation frame, the way a person watches it.
func (b *browser) await(t *testing.T, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Minute)))
	if err != nil {
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		t.Fatalf("browser: awaiting %s: %v; the page says:\n%s%s", what, err, body, b.errorList())
	}
}

// eval evaluates a JavaScript expression that gives a string.
func (b *browser) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

func (b *browser) errorList() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) == 0 {
		return ""
	}
	return "\nconsole errors:\n" + strings.Join(b.errors, "\n")
}

func (b *browser) noConsoleErrors(t *testing.T) {
	t.Helper()
	if list := b.errorList(); list != "" {
		t.Errorf("the browser reported errors:%s", list)
	}
}

// forwarder accepts connections on the host and joins each to one dialed
// in the container, until closed.
type forwarder struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func forward(ln net.Listener, dial func(context.Context) (net.Conn, error)) *forwarder {
	f := &forwarder{ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := dial(ctx)
			cancel()
			if err != nil {
				in.Close()
				continue
			}
			if !f.track(in, out) {
				return
			}
			f.wg.Add(2)
			go f.pipe(in, out)
			go f.pipe(out, in)
		}
	}()
	return f
}

// track records a pair of connections, or closes them if the forwarder is
// closed already.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	_, err := io.Copy(dst, src)
	if err == nil || errors.Is(err, net.ErrClosed) {
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		}
	}
	if err != nil {
		dst.Close()
		src.Close()
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
