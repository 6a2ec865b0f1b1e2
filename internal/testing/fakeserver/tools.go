package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// tool is one built-in tool.
type tool struct {
	name        string
	description string
	schema      string // JSON Schema of the arguments
	// inline tools run on the reading goroutine: they stop the process or the reader.
	inline bool
	run    func(s *server, c *call) (any, error)
}

// call is one tools/call request as received.
type call struct {
	id   json.RawMessage // the request id, byte for byte
	name string
	args json.RawMessage
	meta json.RawMessage
}

// builtinTools is the table of tools every fake server offers, in listing order.
func builtinTools() []tool {
	return []tool{
		{name: "echo", description: "Returns text, with the request id and _meta as received.",
			schema: `{"type":"object","properties":{"text":{"type":"string"}}}`, run: (*server).toolEcho},
		{name: "slow", description: "Sleeps ms milliseconds, then answers.",
			schema: `{"type":"object","properties":{"ms":{"type":"integer","minimum":0},"text":{"type":"string"}}}`, run: (*server).toolSlow},
		{name: "crash", description: "Exits at once with code.",
			schema: `{"type":"object","properties":{"code":{"type":"integer"}}}`, inline: true, run: (*server).toolCrash},
		{name: "hang", description: "Stops reading and writing for good.",
			schema: `{"type":"object"}`, inline: true, run: (*server).toolHang},
		{name: "garbage", description: "Writes a non-JSON line, an over-long line and a response with an unknown id, then answers.",
			schema: `{"type":"object","properties":{"bytes":{"type":"integer","minimum":0}}}`, run: (*server).toolGarbage},
		{name: "huge", description: "Answers with a text of bytes bytes.",
			schema: `{"type":"object","properties":{"bytes":{"type":"integer","minimum":0}}}`, run: (*server).toolHuge},
		{name: "stderr", description: "Writes text and a newline to stderr repeat times, in one write.",
			schema: `{"type":"object","properties":{"text":{"type":"string"},"repeat":{"type":"integer","minimum":0}}}`, run: (*server).toolStderr},
		{name: "stderr_spam", description: "Writes lines lines to stderr as fast as possible; -1 until cancelled.",
			schema: `{"type":"object","properties":{"lines":{"type":"integer","minimum":-1},"prefix":{"type":"string"}}}`, run: (*server).toolStderrSpam},
		{name: "set_tools", description: "Replaces the extra tools and sends burst notifications/tools/list_changed.",
			schema: `{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"}},"burst":{"type":"integer","minimum":0}}}`, run: (*server).toolSetTools},
		{name: "progress", description: "Sends steps progress notifications, then answers.",
			schema: `{"type":"object","properties":{"steps":{"type":"integer","minimum":0},"ms":{"type":"integer","minimum":0},"crash":{"type":"boolean"}}}`, run: (*server).toolProgress},
		{name: "sample", description: "Sends sampling/createMessage to the client and returns its answer.",
			schema: clientRequestSchema, run: clientRequestTool("sampling/createMessage",
				`{"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}],"maxTokens":100}`)},
		{name: "elicit", description: "Sends elicitation/create to the client and returns its answer.",
			schema: clientRequestSchema, run: clientRequestTool("elicitation/create",
				`{"message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`)},
		{name: "roots", description: "Sends roots/list to the client and returns its answer.",
			schema: clientRequestSchema, run: clientRequestTool("roots/list", "")},
		{name: "request", description: "Sends any request to the client and returns its answer; with detach, answers first and sends the request after, with no call in flight.",
			schema: `{"type":"object","properties":{"method":{"type":"string"},"params":{},"id":{},"detach":{"type":"boolean"}},"required":["method"]}`, run: (*server).toolRequest},
		{name: "requests", description: "Sends several requests to the client in one write and returns every answer.",
			schema: `{"type":"object","properties":{"requests":{"type":"array","items":{"type":"object","properties":{"method":{"type":"string"},"params":{}},"required":["method"]}},"wait_cancel":{"type":"boolean"}},"required":["requests"]}`, run: (*server).toolRequests},
		{name: "notify", description: "Sends any notification to the client.",
			schema: `{"type":"object","properties":{"method":{"type":"string"},"params":{}},"required":["method"]}`, run: (*server).toolNotify},
		{name: "log", description: "Sends notifications/message.",
			schema: `{"type":"object","properties":{"level":{"type":"string"},"logger":{"type":"string"},"data":{}}}`, run: (*server).toolLog},
		{name: "loglevel", description: "Returns the level last set by logging/setLevel.",
			schema: `{"type":"object"}`, run: (*server).toolLogLevel},
		{name: "wait_cancel", description: "Waits for its own cancellation and never answers.",
			schema: `{"type":"object"}`, run: (*server).toolWaitCancel},
		{name: "cancelled", description: "Lists every notifications/cancelled received.",
			schema: `{"type":"object"}`, run: (*server).toolCancelled},
		{name: "error", description: "Answers with a JSON-RPC error.",
			schema: `{"type":"object","properties":{"code":{"type":"integer"},"message":{"type":"string"},"data":{}}}`, run: (*server).toolError},
		{name: "touch", description: "Sends notifications/resources/updated for uri.",
			schema: `{"type":"object","properties":{"uri":{"type":"string"}},"required":["uri"]}`, run: (*server).toolTouch},
		{name: "spawn_grandchild", description: "Starts a sleeping grandchild in the same process group, or with setsid in a session of its own.",
			schema: `{"type":"object","properties":{"double_fork":{"type":"boolean"},"ignore_sigterm":{"type":"boolean"},"setsid":{"type":"boolean"}}}`, run: (*server).toolSpawnGrandchild},
		{name: "allocate", description: "Allocates and touches mib MiB of memory and keeps it, to meet a memory limit.",
			schema: `{"type":"object","properties":{"mib":{"type":"integer","minimum":1}},"required":["mib"]}`, run: (*server).toolAllocate},
		{name: "dial", description: "Opens a TCP connection to address and closes it; an error result says why it failed.",
			schema: `{"type":"object","properties":{"address":{"type":"string"}},"required":["address"]}`, run: (*server).toolDial},
		{name: "pid", description: "Returns the process's pid, pgid and ppid, and count: how often pid was called in this process, state a shared server would leak between sessions.",
			schema: `{"type":"object"}`, run: (*server).toolPID},
		{name: "hostname", description: "Returns the host name (of the UTS namespace it runs in): which host of several answered.",
			schema: `{"type":"object"}`, run: (*server).toolHostname},
	}
}

// clientRequestSchema is the argument schema of sample, elicit and roots:
// the request's params and id, and after_ms, how long the tool works
// before it asks.
const clientRequestSchema = `{"type":"object","properties":{"params":{"type":"object"},"id":{},"after_ms":{"type":"integer","minimum":0}}}`

// toolResult is a CallToolResult.
type toolResult struct {
	Content           []textContent `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func textResult(text string, structured any) toolResult {
	return toolResult{Content: []textContent{{Type: "text", Text: text}}, StructuredContent: structured}
}

func (s *server) listTools(m *message) (any, error) {
	type listedTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	all := []any{}
	if s.opts.noToolsIf != "" {
		if _, err := os.Stat(s.opts.noToolsIf); err == nil {
			return listResult("tools", all, ""), nil
		}
	}
	for _, name := range s.order {
		t := s.tools[name]
		all = append(all, listedTool{t.name, t.description, json.RawMessage(t.schema)})
	}
	s.mu.Lock()
	for _, name := range s.extraTools {
		all = append(all, listedTool{name, "A no-op tool.", json.RawMessage(`{"type":"object"}`)})
	}
	s.mu.Unlock()
	for _, raw := range s.fileTools {
		all = append(all, raw)
	}
	items, next, err := page(s, m.Params, all)
	if err != nil {
		return nil, err
	}
	return listResult("tools", items, next), nil
}

func (s *server) callTool(m *message) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams("tools/call: %v", err)
	}
	c := &call{id: m.ID, name: p.Name, args: p.Arguments, meta: p.Meta}
	if t, ok := s.tools[p.Name]; ok {
		return t.run(s, c)
	}
	s.mu.Lock()
	extra := slices.Contains(s.extraTools, p.Name) || slices.Contains(s.fileToolNames, p.Name)
	s.mu.Unlock()
	if extra {
		return textResult(p.Name+" ok", nil), nil
	}
	return nil, invalidParams("unknown tool %q", p.Name)
}

// decodeArgs fills v from the call's arguments; absent arguments keep v's defaults.
func (c *call) decodeArgs(v any) error {
	if len(c.args) == 0 || string(c.args) == "null" {
		return nil
	}
	if err := json.Unmarshal(c.args, v); err != nil {
		return invalidParams("arguments of %s: %v", c.name, err)
	}
	return nil
}

func (s *server) toolEcho(c *call) (any, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	meta := c.meta
	if meta == nil {
		meta = json.RawMessage("null")
	}
	args := c.args
	if args == nil {
		args = json.RawMessage("null")
	}
	return textResult(a.Text, map[string]any{
		"text":      a.Text,
		"id":        c.id,
		"rawId":     string(c.id),
		"meta":      meta,
		"rawMeta":   string(c.meta),
		"arguments": args,
	}), nil
}

func (s *server) toolSlow(c *call) (any, error) {
	var a struct {
		MS   int64  `json:"ms"`
		Text string `json:"text"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	time.Sleep(time.Duration(a.MS) * time.Millisecond)
	return textResult(fmt.Sprintf("slept %d ms", a.MS), map[string]any{"ms": a.MS, "text": a.Text}), nil
}

func (s *server) toolCrash(c *call) (any, error) {
	a := struct {
		Code int `json:"code"`
	}{Code: 1}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	s.log.Info("crashing as told", "code", a.Code)
	os.Exit(a.Code)
	return nil, errNoReply
}

func (s *server) toolHang(*call) (any, error) {
	s.log.Info("hanging as told")
	s.hang()
	sleepForever()
	return nil, errNoReply
}

func (s *server) toolGarbage(c *call) (any, error) {
	a := struct {
		Bytes int `json:"bytes"`
	}{Bytes: 16<<20 + 1<<10}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	s.writeLine([]byte("this is not JSON {"))
	s.writeLine(longLine(a.Bytes))
	s.writeLine([]byte(`{"jsonrpc":"2.0","id":999999999,"result":{}}`))
	return textResult("garbage sent", nil), nil
}

// longLine is a line of exactly n bytes: a JSON notification when n allows.
func longLine(n int) []byte {
	const head, tail = `{"jsonrpc":"2.0","method":"fakeserver/padding","params":{"pad":"`, `"}}`
	if n < len(head)+len(tail) {
		return bytes.Repeat([]byte("x"), n)
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("x"), n-len(head)-len(tail))...)
	return append(b, tail...)
}

func (s *server) toolHuge(c *call) (any, error) {
	var a struct {
		Bytes int `json:"bytes"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	return textResult(strings.Repeat("x", a.Bytes), nil), nil
}

func (s *server) toolStderr(c *call) (any, error) {
	a := struct {
		Text   string `json:"text"`
		Repeat int    `json:"repeat"`
	}{Repeat: 1}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	if a.Repeat < 0 {
		return nil, invalidParams("stderr: repeat %d is negative", a.Repeat)
	}
	b := make([]byte, 0, (len(a.Text)+1)*a.Repeat)
	for range a.Repeat {
		b = append(b, a.Text...)
		b = append(b, '\n')
	}
	s.errMu.Lock()
	_, err := s.stderr.Write(b)
	s.errMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("write stderr: %w", err)
	}
	return textResult(fmt.Sprintf("wrote %d bytes", len(b)), map[string]any{"bytes": len(b)}), nil
}

func (s *server) toolStderrSpam(c *call) (any, error) {
	a := struct {
		Lines  int    `json:"lines"`
		Prefix string `json:"prefix"`
	}{Lines: 1000, Prefix: "spam"}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	forever := a.Lines < 0
	var cancelled chan struct{}
	if forever {
		s.mu.Lock()
		cancelled = s.cancelSignalLocked(c.id)
		s.mu.Unlock()
	}
	s.errMu.Lock()
	w := bufio.NewWriterSize(s.stderr, 64<<10)
	var err error
	for i := 0; forever || i < a.Lines; i++ {
		if forever && i%256 == 0 && (isClosed(cancelled) || isClosed(s.eof)) {
			break
		}
		if _, err = fmt.Fprintf(w, "%s %d\n", a.Prefix, i); err != nil {
			break
		}
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	s.errMu.Unlock()
	switch {
	case err != nil:
		return nil, fmt.Errorf("write stderr: %w", err)
	case forever:
		return nil, errNoReply // a cancelled request gets no answer
	}
	return textResult(fmt.Sprintf("wrote %d lines", a.Lines), map[string]any{"lines": a.Lines}), nil
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (s *server) toolSetTools(c *call) (any, error) {
	a := struct {
		Names []string `json:"names"`
		Burst int      `json:"burst"`
	}{Burst: 1}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.extraTools = slices.Clone(a.Names)
	s.mu.Unlock()
	for range a.Burst {
		s.notify("notifications/tools/list_changed", nil)
	}
	return textResult(fmt.Sprintf("tools set, %d notifications sent", a.Burst), map[string]any{"names": a.Names}), nil
}

func (s *server) toolProgress(c *call) (any, error) {
	var a struct {
		Steps int   `json:"steps"`
		MS    int64 `json:"ms"`
		Crash bool  `json:"crash"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	var meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if len(c.meta) > 0 {
		_ = json.Unmarshal(c.meta, &meta)
	}
	sent := 0
	for i := 1; i <= a.Steps && meta.ProgressToken != nil; i++ {
		if i > 1 && a.MS > 0 {
			time.Sleep(time.Duration(a.MS) * time.Millisecond)
		}
		s.notify("notifications/progress", map[string]any{
			"progressToken": meta.ProgressToken,
			"progress":      i,
			"total":         a.Steps,
			"message":       fmt.Sprintf("step %d of %d", i, a.Steps),
		})
		sent++
	}
	if a.Crash {
		s.log.Info("crashing after progress as told")
		os.Exit(1)
	}
	return textResult(fmt.Sprintf("%d progress notifications sent", sent), map[string]any{"sent": sent}), nil
}

// clientRequestTool makes a tool that sends method with defaultParams (none
// when empty) unless the call gives params.
func clientRequestTool(method, defaultParams string) func(*server, *call) (any, error) {
	return func(s *server, c *call) (any, error) {
		var a struct {
			Params  json.RawMessage `json:"params"`
			ID      json.RawMessage `json:"id"`
			AfterMS int             `json:"after_ms"`
		}
		if err := c.decodeArgs(&a); err != nil {
			return nil, err
		}
		if a.Params == nil && defaultParams != "" {
			a.Params = json.RawMessage(defaultParams)
		}
		time.Sleep(time.Duration(a.AfterMS) * time.Millisecond)
		return s.relayClientRequest(method, a.ID, a.Params)
	}
}

func (s *server) toolRequest(c *call) (any, error) {
	var a struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		ID     json.RawMessage `json:"id"`
		Detach bool            `json:"detach"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	if a.Method == "" {
		return nil, invalidParams("request needs a method")
	}
	if a.Detach {
		// The answer is written before the request: when the client reads
		// the request, no call of it is in flight here any more.
		s.respond(c.id, textResult("sending "+a.Method+" after this answer", nil))
		go s.clientRequest(a.Method, a.ID, a.Params)
		return nil, errNoReply
	}
	return s.relayClientRequest(a.Method, a.ID, a.Params)
}

// relayClientRequest sends a request to the client and turns its answer into
// a tool result.
func (s *server) relayClientRequest(method string, id, params json.RawMessage) (any, error) {
	resp := s.clientRequest(method, id, params)
	switch {
	case resp == nil:
		return nil, errNoReply
	case resp.Error != nil:
		r := textResult(string(resp.Error), map[string]any{"error": resp.Error})
		r.IsError = true
		return r, nil
	default:
		return textResult(string(resp.Result), map[string]any{"result": resp.Result}), nil
	}
}

func (s *server) toolNotify(c *call) (any, error) {
	var a struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	if a.Method == "" {
		return nil, invalidParams("notify needs a method")
	}
	var params any
	if a.Params != nil {
		params = a.Params
	}
	s.notify(a.Method, params)
	return textResult("sent "+a.Method, nil), nil
}

func (s *server) toolLog(c *call) (any, error) {
	a := struct {
		Level  string          `json:"level"`
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}{Level: "info", Data: json.RawMessage(`"hello from fakeserver"`)}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	params := map[string]any{"level": a.Level, "data": a.Data}
	if a.Logger != "" {
		params["logger"] = a.Logger
	}
	s.notify("notifications/message", params)
	return textResult("logged", nil), nil
}

func (s *server) toolLogLevel(*call) (any, error) {
	s.mu.Lock()
	level := s.logLevel
	s.mu.Unlock()
	return textResult(level, map[string]any{"level": level}), nil
}

func (s *server) toolWaitCancel(c *call) (any, error) {
	s.mu.Lock()
	ch := s.cancelSignalLocked(c.id)
	s.mu.Unlock()
	select {
	case <-ch:
		s.log.Info("cancelled as expected", "id", string(c.id))
	case <-s.eof:
	}
	return nil, errNoReply
}

func (s *server) toolCancelled(*call) (any, error) {
	s.mu.Lock()
	list := slices.Clone(s.cancelled)
	s.mu.Unlock()
	if list == nil {
		list = []cancellation{}
	}
	return textResult(fmt.Sprintf("%d cancellations", len(list)), map[string]any{"cancelled": list}), nil
}

func (s *server) toolError(c *call) (any, error) {
	e := rpcError{Code: -32000, Message: "fake error"}
	if err := c.decodeArgs(&e); err != nil {
		return nil, err
	}
	return nil, &e
}

func (s *server) toolTouch(c *call) (any, error) {
	var a struct {
		URI string `json:"uri"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	if a.URI == "" {
		return nil, invalidParams("touch needs a uri")
	}
	s.mu.Lock()
	subscribed := s.subscriptions[a.URI]
	s.mu.Unlock()
	s.notify("notifications/resources/updated", map[string]any{"uri": a.URI})
	return textResult("touched "+a.URI, map[string]any{"uri": a.URI, "subscribed": subscribed}), nil
}

func (s *server) toolSpawnGrandchild(c *call) (any, error) {
	var a struct {
		DoubleFork    bool `json:"double_fork"`
		IgnoreSigterm bool `json:"ignore_sigterm"`
		Setsid        bool `json:"setsid"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	pid, err := startSleeper(s.self, sleeperSpec{
		doubleFork:    a.DoubleFork,
		ignoreSigterm: a.IgnoreSigterm,
		setsid:        a.Setsid,
		max:           s.opts.sleeperMax,
	}, s.stderr)
	if err != nil {
		return nil, err
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return nil, fmt.Errorf("getpgid of grandchild %d: %w", pid, err)
	}
	return textResult(fmt.Sprintf("grandchild %d in group %d", pid, pgid), map[string]any{"pid": pid, "pgid": pgid}), nil
}

// hoard keeps what allocate allocated.
var hoard [][]byte

func (s *server) toolAllocate(c *call) (any, error) {
	var a struct {
		MiB int `json:"mib"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	for range a.MiB {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page, so it is resident
		}
		hoard = append(hoard, b)
	}
	return textResult(fmt.Sprintf("holding %d MiB", len(hoard)), nil), nil
}

func (s *server) toolDial(c *call) (any, error) {
	var a struct {
		Address string `json:"address"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", a.Address, 5*time.Second)
	if err != nil {
		return toolResult{Content: []textContent{{Type: "text", Text: err.Error()}}, IsError: true}, nil
	}
	conn.Close()
	return textResult("connected to "+a.Address, nil), nil
}

func (s *server) toolPID(*call) (any, error) {
	pid := os.Getpid()
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return nil, fmt.Errorf("getpgid: %w", err)
	}
	count := s.counter.Add(1)
	return textResult(fmt.Sprint(pid), map[string]any{"pid": pid, "pgid": pgid, "ppid": os.Getppid(), "count": count}), nil
}

// readToolsFile reads --tools-file: tools listed exactly as written, so
// that a test can change what a server offers between its starts.
func (s *server) readToolsFile() error {
	if s.opts.toolsFile == "" {
		return nil
	}
	data, err := os.ReadFile(s.opts.toolsFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &s.fileTools); err != nil {
		return fmt.Errorf("--tools-file %s: %w", s.opts.toolsFile, err)
	}
	for _, raw := range s.fileTools {
		var t struct {
			Name string `json:"name"`
		}
		json.Unmarshal(raw, &t)
		s.fileToolNames = append(s.fileToolNames, t.Name)
	}
	return nil
}

func (s *server) toolHostname(*call) (any, error) {
	name, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("hostname: %w", err)
	}
	return textResult(name, map[string]any{"hostname": name}), nil
}
