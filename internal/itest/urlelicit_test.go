package itest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// secretURL is what a server sends its user to: its query is a secret of
// the flow, which must reach the client unchanged and no log.
const secretURL = "https://auth.example.com/consent?state=s3cr3t-st4te&x=%2F1"

// urlSession opens a 2025-11-25 session of client token that declares
// the elicitation modes caps and hands every elicitation to asked.
func urlSession(t *testing.T, gw *inputGW, token string, caps *mcp.ElicitationCapabilities, asked func(*mcp.ElicitParams) *mcp.ElicitResult, complete func(string)) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: caps},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return asked(req.Params), nil
		},
	}
	if complete != nil {
		opts.ElicitationCompleteHandler = func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			complete(req.Params.ElicitationID)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "url-elicitation", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.d.URL, HTTPClient: tokenClient(token), MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// URL-mode elicitation from server-everything through the gateway: a 2025
// session gets the elicitation/create and the error -32042 as the server
// sent them, a client that declared no URL mode is never asked, a 2026
// client gets both as input requests and its retries complete the call,
// and the URL reaches the client unchanged and the gateway's log never.
func TestURLElicitationFromServerEverything(t *testing.T) {
	gw := inputGateway(t)
	const tool = "everything__trigger-url-elicitation"
	args := map[string]any{"url": secretURL, "elicitationId": "e-1", "message": "Sign in"}
	urlCaps := &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}

	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	cs := urlSession(t, gw, aliceToken, urlCaps, func(p *mcp.ElicitParams) *mcp.ElicitResult {
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "accept"}
	}, nil)
	testutil.Eventually(t, 60*time.Second, "server-everything's URL elicitation tool", func() bool {
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			return false
		}
		for _, tl := range tools.Tools {
			if tl.Name == tool {
				return true
			}
		}
		return false
	})

	t.Run("2025 session, request", func(t *testing.T) {
		res := testutil.MustCallTool(t, cs, tool, args)
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != 1 || asked[0].Mode != "url" || asked[0].URL != secretURL || asked[0].ElicitationID != "e-1" || asked[0].Message != "Sign in" {
			t.Fatalf("the client was asked %+v; want one URL elicitation of %s, e-1, as the server sent it", asked, secretURL)
		}
		if got := testutil.ToolText(res); !strings.Contains(got, "User completed the URL elicitation flow") {
			t.Errorf("result %q; want the flow completed", got)
		}
	})

	t.Run("2025 session, error -32042", func(t *testing.T) {
		errArgs := map[string]any{"url": secretURL, "elicitationId": "e-2", "errorPath": true}
		_, err := testutil.CallTool(t, cs, tool, errArgs)
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -32042 || !strings.Contains(string(werr.Data), `"mode":"url"`) || !strings.Contains(string(werr.Data), "https://modelcontextprotocol.io") {
			t.Fatalf("call = %v; want the server's error -32042 with its URL elicitation", err)
		}
	})

	t.Run("2025 session without URL mode", func(t *testing.T) {
		called := false
		form := urlSession(t, gw, bobToken, &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}, func(*mcp.ElicitParams) *mcp.ElicitResult {
			called = true
			return &mcp.ElicitResult{Action: "accept"}
		}, nil)
		res, err := testutil.CallTool(t, form, tool, map[string]any{"url": secretURL, "elicitationId": "e-3"})
		if called || (err == nil && !res.IsError) {
			t.Errorf("a client without elicitation.url: asked %v, result %v, %v; want it never asked and the call failed", called, res, err)
		}
	})

	t.Run("2026-07-28 request", func(t *testing.T) {
		caps := `{"elicitation":{"url":{}}}`
		argsJSON := `{"url":"` + secretURL + `","elicitationId":"e-4"}`
		a := gw.call(t, aliceToken, 10, tool, argsJSON, caps, "")
		keys := mustInputRequired(t, a, "elicitation/create")
		req := a.requests(t)[keys["elicitation/create"]]
		var p struct{ Mode, URL, ElicitationID string }
		if err := json.Unmarshal(req.Params, &p); err != nil || p.Mode != "url" || p.URL != secretURL || p.ElicitationID != "e-4" {
			t.Fatalf("input request params %s; want the server's URL elicitation, the URL unchanged", req.Params)
		}
		b := gw.call(t, aliceToken, 11, tool, argsJSON, caps, retryParams(map[string]string{keys["elicitation/create"]: `{"action":"accept"}`}, a.Result.RequestState))
		if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(b.text(), "User completed the URL elicitation flow") {
			t.Errorf("retry: HTTP %d %s; want the flow completed", b.status, b.raw)
		}
	})

	t.Run("2026-07-28 error -32042", func(t *testing.T) {
		caps := `{"elicitation":{"url":{}}}`
		argsJSON := `{"url":"` + secretURL + `","elicitationId":"e-5","errorPath":true}`
		a := gw.call(t, aliceToken, 20, tool, argsJSON, caps, "")
		keys := mustInputRequired(t, a, "elicitation/create")
		if req := a.requests(t)[keys["elicitation/create"]]; !strings.Contains(string(req.Params), `"url":"https://modelcontextprotocol.io"`) {
			t.Fatalf("input request %s; want the error's URL elicitation", req.Params)
		}
		// Its user completed the prerequisite: the retry is a new call,
		// which the server now takes to the URL elicitation itself.
		b := gw.call(t, aliceToken, 21, tool, argsJSON, caps, retryParams(map[string]string{keys["elicitation/create"]: `{"action":"accept"}`}, a.Result.RequestState))
		keys = mustInputRequired(t, b, "elicitation/create")
		if req := b.requests(t)[keys["elicitation/create"]]; !strings.Contains(string(req.Params), `"elicitationId":"e-5"`) {
			t.Fatalf("input request after the retry %s; want the server's own URL elicitation e-5", req.Params)
		}
		c := gw.call(t, aliceToken, 22, tool, argsJSON, caps, retryParams(map[string]string{keys["elicitation/create"]: `{"action":"accept"}`}, b.Result.RequestState))
		if c.Error != nil || c.Result.ResultType != "complete" || !strings.Contains(c.text(), "User completed the URL elicitation flow") {
			t.Errorf("second retry: HTTP %d %s; want the flow completed", c.status, c.raw)
		}
		// The first requestState was used up by the retry.
		d := gw.call(t, aliceToken, 23, tool, argsJSON, caps, retryParams(map[string]string{"elicitation-1": `{"action":"accept"}`}, a.Result.RequestState))
		if d.Error == nil || d.Error.Data.Reason != "replayed" {
			t.Errorf("a replay of the first requestState: HTTP %d %s; want it refused as replayed", d.status, d.raw)
		}
	})

	t.Run("2026-07-28 error without URL mode", func(t *testing.T) {
		a := gw.call(t, aliceToken, 30, tool, `{"url":"`+secretURL+`","elicitationId":"e-6","errorPath":true}`, `{"elicitation":{"form":{}}}`, "")
		if a.Error == nil || a.Error.Code != -32042 {
			t.Errorf("HTTP %d %s; want the server's error -32042 as it is for a client without elicitation.url", a.status, a.raw)
		}
	})

	for _, line := range strings.Split(gw.d.Stderr.String(), "\n") {
		if strings.Contains(line, "s3cr3t-st4te") && !strings.Contains(line, "stream=stderr") {
			t.Errorf("the gateway logged the URL: %s", line)
		}
	}
}

// A server's notifications/elicitation/complete goes to the one session
// its URL elicitation was sent to, even while another session's call is
// the one in flight, and to no other.
func TestURLElicitationCompleteGoesToItsSession(t *testing.T) {
	gw := inputGateway(t)
	urlCaps := &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}
	accept := func(*mcp.ElicitParams) *mcp.ElicitResult { return &mcp.ElicitResult{Action: "accept"} }
	completed := map[string]chan string{"alice": make(chan string, 4), "bob": make(chan string, 4)}
	alice := urlSession(t, gw, aliceToken, urlCaps, accept, func(id string) { completed["alice"] <- id })
	bob := urlSession(t, gw, bobToken, urlCaps, accept, func(id string) { completed["bob"] <- id })

	params := map[string]any{"params": map[string]any{"mode": "url", "url": secretURL, "elicitationId": "e-7", "message": "Sign in"}}
	if res := testutil.MustCallTool(t, alice, "fake__elicit", params); !strings.Contains(testutil.ToolText(res), "accept") {
		t.Fatalf("elicit = %q; want alice's answer", testutil.ToolText(res))
	}
	// bob's call is what is in flight when the server sends it.
	testutil.MustCallTool(t, bob, "fake__notify", map[string]any{"method": "notifications/elicitation/complete", "params": map[string]any{"elicitationId": "e-7"}})
	select {
	case id := <-completed["alice"]:
		if id != "e-7" {
			t.Errorf("alice was told %q completed; want e-7", id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("alice was never told her URL elicitation completed")
	}
	// A second notice of it, and one of an elicitation nobody was sent,
	// go nowhere.
	testutil.MustCallTool(t, bob, "fake__notify", map[string]any{"method": "notifications/elicitation/complete", "params": map[string]any{"elicitationId": "e-7"}})
	testutil.MustCallTool(t, alice, "fake__notify", map[string]any{"method": "notifications/elicitation/complete", "params": map[string]any{"elicitationId": "e-unknown"}})
	testutil.MustCallTool(t, alice, "fake__echo", map[string]any{"text": "after"})
	testutil.MustCallTool(t, bob, "fake__echo", map[string]any{"text": "after"})
	select {
	case id := <-completed["bob"]:
		t.Errorf("bob was told %q completed; his client was sent no URL elicitation", id)
	case id := <-completed["alice"]:
		t.Errorf("alice was told again, of %q", id)
	default:
	}
}
