package gateway_test

// Stateless (MCP 2026-07-28) requests on the same endpoint as 2025
// sessions, against the real mcpgated, in raw HTTP: the headers, status
// codes and spliced result members are what is checked.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

const modern = "2026-07-28"

// modernMeta is the _meta of a stateless request with the given client
// capabilities and more members (each `"key":value`).
func modernMeta(caps string, more ...string) string {
	m := fmt.Sprintf(`{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":%s,"io.modelcontextprotocol/clientInfo":{"name":"raw2026","version":"1"}`, modern, caps)
	for _, x := range more {
		m += "," + x
	}
	return m + "}"
}

// modernBody is a stateless request: params holds the members besides _meta.
func modernBody(id any, method, params string, meta string) string {
	if params != "" {
		params = "," + params
	}
	idJSON, _ := json.Marshal(id)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{"_meta":%s%s}}`, idJSON, method, meta, params)
}

// modernHeaders are the headers a 2026-07-28 client sends with a request
// of method; name is Mcp-Name's value ("" for none).
func modernHeaders(method, name string) []string {
	h := []string{mcphttp.HeaderProtocol, modern, "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// postRaw posts body to url with the given header pairs (a value "-"
// deletes the header) and the usual Accept and Content-Type.
func postRaw(t *testing.T, ctx context.Context, url, body string, header ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, wait)
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(rawRequest(ctx, url, body, header...))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// rawRequest is the POST postRaw sends, for a request that is cancelled
// while it waits, which postRaw would fail the test on.
func rawRequest(ctx context.Context, url, body string, header ...string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		panic(err) // a test's own URL
	}
	req.Header.Set("Accept", mcphttp.AcceptPost)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "-" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Add(header[i], header[i+1])
	}
	return req
}

// modernCall posts a stateless request and returns the HTTP status and
// the response message (the last message of an event stream).
func modernCall(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	resp := postRaw(t, context.Background(), url, body, header...)
	defer resp.Body.Close()
	if id := resp.Header.Get(mcphttp.HeaderSession); id != "" {
		t.Errorf("a stateless request got %s %q", mcphttp.HeaderSession, id)
	}
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), mcphttp.MediaSSE) {
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if len(ev.Data) > 0 {
				data = ev.Data
			}
		}
	} else {
		data, _ = io.ReadAll(resp.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("HTTP %d: not JSON: %v: %q", resp.StatusCode, err, data)
	}
	return resp.StatusCode, m
}

func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return int(code)
}

func resultOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	return r
}

// checkModernResult checks the members every result a 2026-07-28 client
// gets has: resultType and the gateway's serverInfo; cacheable results
// also the caching hints, private as lists differ per client.
func checkModernResult(t *testing.T, r map[string]any, cacheable bool) {
	t.Helper()
	if r["resultType"] != "complete" {
		t.Errorf("resultType = %v, want complete: %v", r["resultType"], r)
	}
	meta, _ := r["_meta"].(map[string]any)
	info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if info["name"] != "mcpgate" {
		t.Errorf("_meta serverInfo = %v, want mcpgate's", meta)
	}
	if cacheable {
		if ttl, ok := r["ttlMs"].(float64); !ok || ttl < 0 || r["cacheScope"] != "private" {
			t.Errorf("ttlMs %v cacheScope %v, want ttlMs >= 0 and private", r["ttlMs"], r["cacheScope"])
		}
	} else if _, has := r["ttlMs"]; has {
		t.Errorf("a result that is not cacheable has ttlMs: %v", r)
	}
}

// One endpoint serves both eras: a 2025 session and stateless requests
// list and call tools side by side, and the stateless ones get
// 2026-07-28's result members without a session.
func TestStatelessBesideSessions(t *testing.T) {
	d := startGateway(t, "", fakeBackend(t, "fake", "", "--tools", "alpha"))
	sess := rawInit(t, d.URL, "2025-11-25", `{}`)

	status, m := modernCall(t, d.URL, modernBody(1, "tools/list", "", modernMeta(`{}`)), modernHeaders("tools/list", "")...)
	if status != http.StatusOK {
		t.Fatalf("tools/list: HTTP %d: %v", status, m)
	}
	r := resultOf(t, m)
	checkModernResult(t, r, true)
	tools, _ := r["tools"].([]any)
	if len(tools) == 0 {
		t.Fatalf("no tools: %v", r)
	}

	status, m = modernCall(t, d.URL, modernBody("c1", "tools/call", `"name":"fake__echo","arguments":{"text":"hi"}`, modernMeta(`{}`)), modernHeaders("tools/call", "fake__echo")...)
	if status != http.StatusOK || m["id"] != "c1" {
		t.Fatalf("tools/call: HTTP %d: %v", status, m)
	}
	r = resultOf(t, m)
	checkModernResult(t, r, false)
	if sc, _ := r["structuredContent"].(map[string]any); sc["text"] != "hi" {
		t.Errorf("echo answered %v", r)
	}

	// The session is untouched: its results are 2025's, without the
	// members a stateless client gets.
	resp := sess.post(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fake__echo","arguments":{"text":"s"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "resultType") || !strings.Contains(string(body), `"text":"s"`) {
		t.Errorf("session tools/call: HTTP %d: %s", resp.StatusCode, body)
	}
}

// Every header rule of 2026-07-28: what a mismatch, a missing header, an
// unsupported version, a malformed _meta and an unknown or removed
// method get, by HTTP status and JSON-RPC code.
func TestStatelessHeaderRules(t *testing.T) {
	d := startGateway(t, "", fakeBackend(t, "fake", "", "--resources", "1", "--prompts"))
	meta := modernMeta(`{}`)
	call := modernBody(1, "tools/call", `"name":"fake__echo","arguments":{"text":"x"}`, meta)
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	cases := []struct {
		name   string
		body   string
		header []string
		status int
		code   int
	}{
		{"all right", call, modernHeaders("tools/call", "fake__echo"), 200, 0},
		{"Mcp-Name in base64", call, modernHeaders("tools/call", b64("fake__echo")), 200, 0},
		{"version header missing", call, []string{"Mcp-Method", "tools/call", "Mcp-Name", "fake__echo"}, 400, -32020},
		{"version header differs", call, []string{mcphttp.HeaderProtocol, "2025-11-25", "Mcp-Method", "tools/call", "Mcp-Name", "fake__echo"}, 400, -32020},
		{"Mcp-Method missing", call, []string{mcphttp.HeaderProtocol, modern, "Mcp-Name", "fake__echo"}, 400, -32020},
		{"Mcp-Method differs", call, modernHeaders("tools/list", "echo"), 400, -32020},
		{"Mcp-Name missing", call, modernHeaders("tools/call", ""), 400, -32020},
		{"Mcp-Name differs", call, modernHeaders("tools/call", "other"), 400, -32020},
		{"Mcp-Name bad base64", call, modernHeaders("tools/call", "=?base64?!!!?="), 400, -32020},
		{"Mcp-Name of prompts/get", modernBody(2, "prompts/get", `"name":"fake__greet","arguments":{"name":"x"}`, meta), modernHeaders("prompts/get", "nope"), 400, -32020},
		{"Mcp-Name of resources/read", modernBody(3, "resources/read", `"uri":"fake://r/0"`, meta), modernHeaders("resources/read", "fake://r/0"), 200, 0},
		{"Mcp-Name of resources/read differs", modernBody(3, "resources/read", `"uri":"fake://r/0"`, meta), modernHeaders("resources/read", "fake://r/1"), 400, -32020},
		{"unsupported version", strings.Replace(call, modern, "2099-01-01", 1), []string{mcphttp.HeaderProtocol, "2099-01-01", "Mcp-Method", "tools/call", "Mcp-Name", "fake__echo"}, 400, -32022},
		{"2025 version without a session", strings.Replace(call, modern, "2025-11-25", 1), []string{mcphttp.HeaderProtocol, "2025-11-25", "Mcp-Method", "tools/call", "Mcp-Name", "fake__echo"}, 400, -32022},
		{"no clientCapabilities", strings.Replace(call, `"io.modelcontextprotocol/clientCapabilities":{},`, "", 1), modernHeaders("tools/call", "fake__echo"), 400, -32602},
		{"no _meta version, 2026 header", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, modernHeaders("tools/list", ""), 400, -32602},
		{"bad logLevel", modernBody(4, "tools/list", "", modernMeta(`{}`, `"io.modelcontextprotocol/logLevel":"loud"`)), modernHeaders("tools/list", ""), 400, -32602},
		{"unknown method", modernBody(5, "no/such", "", meta), modernHeaders("no/such", ""), 404, -32601},
		{"ping is gone", modernBody(6, "ping", "", meta), modernHeaders("ping", ""), 404, -32601},
		{"logging/setLevel is gone", modernBody(7, "logging/setLevel", `"level":"debug"`, meta), modernHeaders("logging/setLevel", ""), 404, -32601},
		{"resources/subscribe is gone", modernBody(8, "resources/subscribe", `"uri":"fake://r/0"`, meta), modernHeaders("resources/subscribe", ""), 404, -32601},
		{"initialize with 2026 _meta and headers", modernBody(9, "initialize", `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}`, meta), modernHeaders("initialize", ""), 404, -32601},
		{"initialize with 2026 _meta only", modernBody(10, "initialize", "", meta), []string{"Mcp-Method", "-"}, 404, -32601},
		{"initialize with the 2026 header only", `{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, []string{mcphttp.HeaderProtocol, modern}, 404, -32601},
		{"batch", "[" + call + "]", modernHeaders("tools/call", "fake__echo"), 400, -32600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, m := modernCall(t, d.URL, c.body, c.header...)
			if status != c.status || errorCode(m) != c.code {
				t.Errorf("HTTP %d code %d, want HTTP %d code %d: %v", status, errorCode(m), c.status, c.code, m)
			}
		})
	}

	// GET and DELETE of a 2026-07-28 client: 405, nothing to stream or end.
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, d.URL, nil)
		req.Header.Set("Accept", mcphttp.MediaSSE)
		req.Header.Set(mcphttp.HeaderProtocol, modern)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s with MCP-Protocol-Version %s and no session: HTTP %d, want 405", method, modern, resp.StatusCode)
		}
	}

	// The unsupported version's error lists what is supported and what
	// was asked for.
	_, m := modernCall(t, d.URL, strings.Replace(call, modern, "2099-01-01", 1), mcphttp.HeaderProtocol, "2099-01-01", "Mcp-Method", "tools/call", "Mcp-Name", "fake__echo")
	data, _ := m["error"].(map[string]any)["data"].(map[string]any)
	supported, _ := data["supported"].([]any)
	if len(supported) == 0 || supported[0] != modern || data["requested"] != "2099-01-01" {
		t.Errorf("unsupported version data = %v", data)
	}
}

// server/discover answers what the merged catalog offers the client,
// the versions the gateway speaks, its serverInfo and the backends'
// instructions; other results are decorated as every stateless result.
func TestStatelessDiscover(t *testing.T) {
	d := startGateway(t, "", fakeBackend(t, "fake", "", "--instructions", "use the echo tool", "--resources", "1"))
	status, m := modernCall(t, d.URL, modernBody(1, "server/discover", "", modernMeta(`{}`)), modernHeaders("server/discover", "")...)
	if status != http.StatusOK {
		t.Fatalf("HTTP %d: %v", status, m)
	}
	r := resultOf(t, m)
	checkModernResult(t, r, true)
	versions, _ := r["supportedVersions"].([]any)
	if len(versions) != 4 || versions[0] != modern || versions[1] != "2025-11-25" {
		t.Errorf("supportedVersions = %v", versions)
	}
	caps, _ := r["capabilities"].(map[string]any)
	if caps["tools"] == nil || caps["resources"] == nil || caps["prompts"] != nil {
		t.Errorf("capabilities = %v, want tools and resources only", caps)
	}
	if !strings.Contains(fmt.Sprint(r["instructions"]), "use the echo tool") {
		t.Errorf("instructions = %v", r["instructions"])
	}

	// resources/read is cacheable; a resource not found is -32602 now.
	_, m = modernCall(t, d.URL, modernBody(2, "resources/read", `"uri":"fake://r/0"`, modernMeta(`{}`)), modernHeaders("resources/read", "fake://r/0")...)
	checkModernResult(t, resultOf(t, m), true)
	status, m = modernCall(t, d.URL, modernBody(3, "resources/read", `"uri":"nowhere://x"`, modernMeta(`{}`)), modernHeaders("resources/read", "nowhere://x")...)
	if status != http.StatusOK || errorCode(m) != -32602 {
		t.Errorf("resource not found: HTTP %d code %d, want 200 -32602: %v", status, errorCode(m), m)
	}
}

// modernEvents posts a stateless request and returns every message of
// the answer (one for plain JSON), failing on an SSE event with an id:
// 2026-07-28 streams are not resumable.
func modernEvents(t *testing.T, url, body string, header ...string) []message {
	t.Helper()
	resp := postRaw(t, context.Background(), url, body, header...)
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), mcphttp.MediaSSE) {
		data, _ := io.ReadAll(resp.Body)
		return []message{decode(t, string(data))}
	}
	var out []message
	r := mcphttp.NewEventReader(resp.Body, 1<<20)
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		if ev.ID != "" || ev.Retry != 0 {
			t.Errorf("a stateless stream has an event with id %q retry %v", ev.ID, ev.Retry)
		}
		if len(ev.Data) > 0 {
			out = append(out, decode(t, string(ev.Data)))
		}
	}
}

func methods(msgs []message) []string {
	var out []string
	for _, m := range msgs {
		if m.Method != "" {
			out = append(out, m.Method)
		} else {
			out = append(out, "response")
		}
	}
	return out
}

// A stateless call's progress, and the backend's log messages at or above
// the request's logLevel, ride its response stream; without a logLevel it
// gets no log message. The backend is set to log that verbosely.
func TestStatelessProgressAndLogLevel(t *testing.T) {
	d := startGateway(t, "", fakeBackend(t, "f", ""))
	call := func(tool, args string, meta string) []message {
		return modernEvents(t, d.URL, modernBody(1, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), meta), modernHeaders("tools/call", tool)...)
	}
	got := call("f__progress", `{"steps":2,"ms":1}`, modernMeta(`{}`, `"progressToken":"p1"`))
	if m := methods(got); strings.Join(m, " ") != "notifications/progress notifications/progress response" {
		t.Fatalf("progress call: %v", m)
	}
	if got[0].Params["progressToken"] != "p1" {
		t.Errorf("progress token %v, want the client's p1", got[0].Params["progressToken"])
	}

	got = call("f__log", `{"level":"warning","data":"w1"}`, modernMeta(`{}`, `"io.modelcontextprotocol/logLevel":"info"`))
	if m := methods(got); strings.Join(m, " ") != "notifications/message response" || got[0].Params["data"] != "w1" {
		t.Errorf("log call at level info: %v %v", m, got)
	}
	if got := call("f__loglevel", `{}`, modernMeta(`{}`)); !strings.Contains(string(got[0].Result), `"level":"info"`) {
		t.Errorf("the backend's level after a request at info: %s", got[0].Result)
	}
	got = call("f__log", `{"level":"warning","data":"w2"}`, modernMeta(`{}`, `"io.modelcontextprotocol/logLevel":"error"`))
	if m := methods(got); strings.Join(m, " ") != "response" {
		t.Errorf("a warning reached a request at level error: %v", m)
	}
	got = call("f__log", `{"level":"emergency","data":"w3"}`, modernMeta(`{}`))
	if m := methods(got); strings.Join(m, " ") != "response" {
		t.Errorf("a request without logLevel got a log message: %v", m)
	}
}

// Closing a stateless request's connection cancels its backend call; a
// backend's request to the client of a stateless call becomes an
// InputRequiredResult, and never reaches a client without the capability.
func TestStatelessCancelAndClientRequests(t *testing.T) {
	record := recordFile(t, "f")
	d := startGateway(t, "", fakeBackend(t, "f", "", "--record", record))
	observer := connect(t, d, testutil.NewClientEvents("observer"), nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := modernBody(1, "tools/call", `"name":"f__wait_cancel","arguments":{"who":"stateless"}`, modernMeta(`{}`))
		if resp, err := http.DefaultClient.Do(rawRequest(ctx, d.URL, body, modernHeaders("tools/call", "f__wait_cancel")...)); err == nil {
			resp.Body.Close()
		}
	}()
	id := backendID(t, awaitRecorded(t, record, 1, `"who":"stateless"`)[0])
	cancel()
	<-done
	if reason := awaitCancelled(t, observer, "f__cancelled", id); !strings.Contains(reason, "disconnected") && !strings.Contains(reason, "closed") {
		t.Errorf("cancellation reason %q, want one saying the client went away", reason)
	}

	// Without the capability, the client learns which one it lacks, with
	// HTTP 400, and the backend's call is cancelled.
	status, m := modernCall(t, d.URL, modernBody(3, "tools/call", `"name":"f__sample","arguments":{"id":"nocap"}`, modernMeta(`{}`)), modernHeaders("tools/call", "f__sample")...)
	data, _ := m["error"].(map[string]any)["data"].(map[string]any)
	required, _ := data["requiredCapabilities"].(map[string]any)
	if status != http.StatusBadRequest || errorCode(m) != -32021 || required["sampling"] == nil {
		t.Errorf("sampling without the capability: HTTP %d %v; want 400 with -32021 naming sampling", status, m)
	}
	id = backendID(t, awaitRecorded(t, record, 1, `"name":"sample"`, `"id":"nocap"`)[0])
	if reason := awaitCancelled(t, observer, "f__cancelled", id); !strings.Contains(reason, "capability sampling") {
		t.Errorf("cancellation reason %q, want one naming the capability", reason)
	}

	// With it, the backend's request becomes an InputRequiredResult (last:
	// while its call waits for the retry, another call's request on f could
	// not be told apart from its own).
	got := modernEvents(t, d.URL, modernBody(2, "tools/call", `"name":"f__sample","arguments":{}`, modernMeta(`{"sampling":{}}`)), modernHeaders("tools/call", "f__sample")...)
	if m := methods(got); len(m) != 1 || !strings.Contains(string(got[0].Result), `"resultType":"input_required"`) {
		t.Errorf("sampling during a stateless call: %v %s; want an InputRequiredResult", m, got[len(got)-1].Result)
	}
}

// subscriptions/listen: acknowledged first with what the gateway agreed
// to (max_subscriptions bounds the resources; a listener counts against
// max_sessions), then list_changed and resource updates tagged with the
// subscription id; closing the stream unsubscribes the backend.
func TestStatelessListen(t *testing.T) {
	record := recordFile(t, "f")
	d := startGateway(t, "max_subscriptions = 1\nmax_sessions = 1\n", fakeBackend(t, "f", "", "--resources", "2", "--record", record))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := modernBody("L1", "subscriptions/listen", `"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://r/0","fake://r/1"]}`, modernMeta(`{}`))
	resp := postRaw(t, ctx, d.URL, body, modernHeaders("subscriptions/listen", "")...)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), mcphttp.MediaSSE) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("listen: HTTP %d %s", resp.StatusCode, b)
	}
	events := make(chan message, 16)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 0 {
				events <- decode(t, string(ev.Data))
			}
		}
	}()
	next := func(what string) message {
		t.Helper()
		select {
		case m, ok := <-events:
			if !ok {
				t.Fatalf("the listen stream ended before %s", what)
			}
			return m
		case <-time.After(wait):
			t.Fatalf("no %s on the listen stream", what)
		}
		return message{}
	}
	subID := func(m message) any {
		meta, _ := m.Params["_meta"].(map[string]any)
		return meta["io.modelcontextprotocol/subscriptionId"]
	}
	ack := next("acknowledgement")
	if ack.Method != "notifications/subscriptions/acknowledged" || subID(ack) != "L1" {
		t.Fatalf("first message %+v, want the acknowledgement tagged L1", ack)
	}
	agreed, _ := ack.Params["notifications"].(map[string]any)
	if fmt.Sprint(agreed["resourceSubscriptions"]) != "[fake://r/0]" || agreed["toolsListChanged"] != true || agreed["promptsListChanged"] != nil {
		t.Errorf("acknowledged %v; want tools list changes and fake://r/0 only (max_subscriptions 1)", agreed)
	}
	awaitRecorded(t, record, 1, `"method":"resources/subscribe"`, `fake://r/0`)

	call := func(tool, args string) {
		t.Helper()
		status, m := modernCall(t, d.URL, modernBody(1, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), modernMeta(`{}`)), modernHeaders("tools/call", tool)...)
		if status != http.StatusOK || m["error"] != nil {
			t.Fatalf("%s: HTTP %d %v", tool, status, m)
		}
	}
	call("f__touch", `{"uri":"fake://r/0"}`)
	if m := next("the resource update"); m.Method != "notifications/resources/updated" || m.Params["uri"] != "fake://r/0" || subID(m) != "L1" {
		t.Errorf("got %+v, want resources/updated of fake://r/0 tagged L1", m)
	}
	call("f__set_tools", `{"names":["zeta"]}`)
	if m := next("tools/list_changed"); m.Method != "notifications/tools/list_changed" || subID(m) != "L1" {
		t.Errorf("got %+v, want tools/list_changed tagged L1", m)
	}

	// A listener counts as a session: max_sessions 1 is reached.
	status, m := modernCall(t, d.URL, modernBody("L9", "subscriptions/listen", `"notifications":{"toolsListChanged":true}`, modernMeta(`{}`)), modernHeaders("subscriptions/listen", "")...)
	if status != http.StatusOK || errorCode(m) != -32005 {
		t.Errorf("a second listener beyond max_sessions 1: HTTP %d %v; want error -32005", status, m)
	}

	cancel() // the client closes the stream: the backend is unsubscribed
	awaitRecorded(t, record, 1, `"method":"resources/unsubscribe"`, `fake://r/0`)

	// A listener the gateway ends as it stops gets a result to its request.
	resp = postRaw(t, context.Background(), d.URL, modernBody("L2", "subscriptions/listen", `"notifications":{"promptsListChanged":true}`, modernMeta(`{}`)), modernHeaders("subscriptions/listen", "")...)
	defer resp.Body.Close()
	r := mcphttp.NewEventReader(resp.Body, 1<<20)
	var last message
	for i := 0; ; i++ {
		ev, err := r.Next()
		if err != nil {
			break
		}
		if i == 0 {
			d.Signal(syscall.SIGTERM) // acknowledged: stop the gateway
		}
		if len(ev.Data) > 0 {
			last = decode(t, string(ev.Data))
		}
	}
	if string(last.ID) != `"L2"` || !strings.Contains(string(last.Result), `"io.modelcontextprotocol/subscriptionId":"L2"`) || !strings.Contains(string(last.Result), `"resultType":"complete"`) {
		t.Errorf("the listen stream ended with %+v; want a result to L2 tagged with it", last)
	}
}
