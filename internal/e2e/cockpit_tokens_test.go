package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The steps of TestCockpitPage about the gateway panel, the clients and
// their tokens, and the link to Cockpit's Logs page.

// checkGatewayPanel: the operator sees the sockets systemd handed in, the
// open session and its client, and the client's session and last seen.
func (p *cockpitCheck) checkGatewayPanel(t *testing.T, b *browser) {
	t.Helper()
	b.await(t, "the listeners systemd handed in", `(() => {
		const l = document.getElementById("gw-listeners").textContent;
		return l.includes("127.0.0.1:7431 (tcp, from systemd)") && l.includes("/run/mcpgate/mcpgate.sock (unix, from systemd)");
	})()`)
	b.await(t, "a session and a client connected", `Number(document.getElementById("gw-sessions").textContent) >= 1 &&
		document.getElementById("gw-clients").textContent === "1"`)
	b.await(t, "the client e2e's session and last seen", clientCell("e2e", "sessions")+` === "1" && `+clientCell("e2e", "seen")+` !== "–"`)
}

func clientCell(client, field string) string {
	return fmt.Sprintf(`((document.querySelector('#clients tr[data-client=%q] [data-field=%q]') || {}).textContent || "")`, client, field)
}

// checkTokens: the operator creates a token for client e2e and sees it
// once; the gateway lets it in; once the operator took it off the page it
// is nowhere on it; revoked, the gateway refuses it.
func (p *cockpitCheck) checkTokens(t *testing.T, b *browser) string {
	t.Helper()
	b.run(t, "create a token", chromedp.Click(chromedp.CSS(`#clients tr[data-client="e2e"] button[data-action="create-token"]`)))
	b.await(t, "the new token, shown once", `!document.getElementById("token-once").hidden &&
		document.getElementById("token-value").value.startsWith("mcpgate_")`)
	token := b.eval(t, `document.getElementById("token-value").value`)
	id := b.eval(t, `document.getElementById("token-id").textContent`)
	b.await(t, "the token's revoke button", fmt.Sprintf(`!!document.querySelector('#clients tr[data-client="e2e"] button[data-token=%q]')`, id))
	if status := p.initialize(t, token); status != http.StatusOK {
		t.Fatalf("initialize with the token the page showed: HTTP %d, want 200", status)
	}
	shot := p.screenshot(t, b, "cockpit-token.png", 1280, 900, false)
	b.run(t, "done with the token", chromedp.Click(chromedp.CSS("#token-done")))
	b.await(t, "the token off the page", fmt.Sprintf(`document.getElementById("token-once").hidden &&
		!document.documentElement.outerHTML.includes(%q) && document.getElementById("token-value").value === ""`, token))

	b.run(t, "revoke the token", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#clients tr[data-client="e2e"] button[data-token=%q]`, id))))
	b.await(t, "the revocation", `document.getElementById("message").textContent.startsWith("Revoked token ")`)
	b.await(t, "no revoke button left", fmt.Sprintf(`!document.querySelector('#clients tr[data-client="e2e"] button[data-token=%q]')`, id))
	if status := p.initialize(t, token); status != http.StatusUnauthorized {
		t.Fatalf("initialize with the revoked token: HTTP %d, want 401", status)
	}
	if log := p.g.c.Run(t, "journalctl", "-u", "mcpgate", "--no-pager", "-o", "cat"); strings.Contains(log, token) {
		t.Errorf("the journal holds the token")
	}
	return fmt.Sprintf("token %s created (HTTP 200 with it), shown once, revoked (HTTP 401); screenshot %s", id, shot)
}

// checkLogsLink: the journal view's link leads to Cockpit's Logs page
// filtered on the backend's field, and a click asks the shell to go there
// (checkLogsPage follows it).
func (p *cockpitCheck) checkLogsLink(t *testing.T, b *browser, backend string) {
	t.Helper()
	want := "/system/logs#/?priority=debug&MCPGATE_BACKEND=" + backend
	if href := b.eval(t, `document.getElementById("log-link").getAttribute("href")`); href != want {
		t.Errorf("the Logs link is %q, want %q", href, want)
	}
	b.eval(t, `(() => { window.jumpedTo = ""; cockpit.jump = where => { window.jumpedTo = where }; return "" })()`)
	b.run(t, "open in Logs", chromedp.Click(chromedp.CSS("#log-link")))
	b.await(t, "a jump to "+want, fmt.Sprintf(`window.jumpedTo === %q`, want))
}

// checkLogsPage opens the Logs link's target in Cockpit's shell: the Logs
// page (cockpit-system), filtered on the backend's field, shows the line
// the backend wrote to stderr. Console errors of Cockpit's own pages are
// not counted.
func (p *cockpitCheck) checkLogsPage(t *testing.T, b *browser, backend, line string) {
	t.Helper()
	target := "/system/logs#/?priority=debug&MCPGATE_BACKEND=" + backend
	b.run(t, "open "+target, chromedp.Navigate(p.base+target))
	b.await(t, "the Logs page filtered on "+backend+" with the line "+line, fmt.Sprintf(`[...document.querySelectorAll("iframe")].some(f => {
		try {
			const w = f.contentWindow;
			return w.location.pathname.endsWith("/system/logs.html") &&
				decodeURIComponent(w.location.hash).includes(%q) &&
				w.document.body.innerText.includes(%q);
		} catch (e) { return false; }
	})`, "MCPGATE_BACKEND="+backend, line))
}

// checkViewerTokens: a user without org.mcpgate.Gateway1.tokens is refused
// a token, with the reason, and sees none.
func (p *cockpitCheck) checkViewerTokens(t *testing.T, b *browser) string {
	t.Helper()
	b.run(t, "create a token", chromedp.Click(chromedp.CSS(`#clients tr[data-client="e2e"] button[data-action="create-token"]`)))
	b.await(t, "the refusal", `document.getElementById("message").textContent.startsWith("Create a token for e2e refused: ")`)
	msg := b.eval(t, `document.getElementById("message").textContent`)
	if !strings.Contains(msg, accessDenied) || !strings.Contains(msg, "org.mcpgate.Gateway1.tokens") {
		t.Errorf("the refusal %q does not name %s and the action", msg, accessDenied)
	}
	if shown := b.eval(t, `String(!document.getElementById("token-once").hidden)`); shown != "false" {
		t.Errorf("a refused viewer sees a token box")
	}
	return msg
}

// initialize opens an MCP session at the gateway with token and returns
// the HTTP status.
func (p *cockpitCheck) initialize(t *testing.T, token string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cockpit-e2e","version":"1"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gatewayURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := p.g.c.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
