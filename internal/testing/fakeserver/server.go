package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// latestProtocolVersion is answered when a client asks for one we do not know.
const latestProtocolVersion = "2025-11-25"

// JSON-RPC and MCP error codes.
const (
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeInternalError    = -32603
	codeResourceNotFound = -32002
)

// message is any JSON-RPC message; raw fields stay exactly as received.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// rpcError is a JSON-RPC error a handler answers with.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// invalidParams reports bad request parameters.
func invalidParams(format string, args ...any) *rpcError {
	return &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// errNoReply tells the dispatcher that a request is deliberately left unanswered.
var errNoReply = errors.New("no reply")

// methodHandler answers one request method.
type methodHandler func(s *server, m *message) (any, error)

// cancellation is one notifications/cancelled the server received.
type cancellation struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
}

// server is one fake MCP server on one pair of pipes.
type server struct {
	opts    *options
	log     *slog.Logger
	self    string // this executable, for grandchildren
	methods map[string]methodHandler
	tools   map[string]tool // built-in tools by name
	order   []string        // built-in tool names in listing order
	record  *os.File

	outMu sync.Mutex
	out   io.Writer
	hung  bool // set by hang: nothing is written any more

	errMu  sync.Mutex // keeps the lines of stderr and stderr_spam whole
	stderr io.Writer

	toolCalls atomic.Int64
	nextID    atomic.Int64
	counter   atomic.Int64 // calls of the pid tool: per-process state

	inFlight sync.WaitGroup // request handlers
	eof      chan struct{}  // closed when stdin ends: no answer can arrive any more

	mu            sync.Mutex
	extraTools    []string
	fileTools     []json.RawMessage // from --tools-file, as written
	fileToolNames []string
	logLevel      string
	subscriptions map[string]bool
	cancelled     []cancellation
	cancelSignals map[string]chan struct{} // by compacted request id
	pending       map[string]chan *message // server→client requests by compacted id
}

// newServer prepares a server writing to out and logging to stderr.
func newServer(opts *options, out, stderr io.Writer) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	s := &server{
		opts:          opts,
		log:           slog.New(slog.NewTextHandler(stderr, nil)).With("server", opts.name),
		self:          self,
		methods:       methods(opts),
		tools:         make(map[string]tool),
		out:           out,
		stderr:        stderr,
		extraTools:    slices.Clone(opts.tools),
		subscriptions: make(map[string]bool),
		cancelSignals: make(map[string]chan struct{}),
		pending:       make(map[string]chan *message),
		eof:           make(chan struct{}),
	}
	if err := s.readToolsFile(); err != nil {
		return nil, err
	}
	for _, t := range builtinTools() {
		s.tools[t.name] = t
		s.order = append(s.order, t.name)
	}
	if opts.record != "" {
		s.record, err = os.OpenFile(opts.record, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open record file: %w", err)
		}
	}
	return s, nil
}

// close releases the record file.
func (s *server) close() {
	if s.record != nil {
		s.record.Close()
	}
}

// serve reads messages until stdin ends, then waits for the requests in
// progress. Requests run concurrently; a notification or response is handled
// before the next line is read, so its effect is visible to everything after it.
func (s *server) serve(in io.Reader) error {
	defer s.inFlight.Wait()
	defer close(s.eof)
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			s.recordLine(line)
			s.handleLine(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
	}
}

func (s *server) recordLine(line []byte) {
	if s.record == nil {
		return
	}
	if _, err := s.record.Write(line); err != nil {
		s.log.Error("record message", "file", s.opts.record, "err", err)
	}
}

func (s *server) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.log.Warn("dropping unparsable line", "err", err, "bytes", len(line))
		return
	}
	switch {
	case m.Method != "" && m.ID != nil:
		if m.Method == "tools/call" {
			s.countToolCall()
			if t, ok := s.tools[toolName(m.Params)]; ok && t.inline {
				// Tools that stop the process or the reader run here, so
				// nothing after them is read.
				s.dispatch(&m)
				return
			}
		}
		s.inFlight.Add(1)
		go func() {
			defer s.inFlight.Done()
			s.dispatch(&m)
		}()
	case m.Method != "":
		s.handleNotification(&m)
	case m.ID != nil:
		s.deliver(&m)
	default:
		s.log.Warn("dropping message that is neither request, notification nor response", "bytes", len(line))
	}
}

// countToolCall implements --crash-after.
func (s *server) countToolCall() {
	n := s.toolCalls.Add(1)
	if s.opts.crashAfter >= 0 && n > s.opts.crashAfter {
		s.log.Info("crashing as told", "after", s.opts.crashAfter, "code", s.opts.crashCode)
		os.Exit(s.opts.crashCode)
	}
}

// toolName peeks at the name of a tools/call.
func toolName(params json.RawMessage) string {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Name
}

// dispatch answers one request.
func (s *server) dispatch(m *message) {
	h, ok := s.methods[m.Method]
	if !ok {
		s.respondError(m.ID, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + m.Method})
		return
	}
	result, err := h(s, m)
	var rerr *rpcError
	switch {
	case errors.Is(err, errNoReply):
	case errors.As(err, &rerr):
		s.respondError(m.ID, rerr)
	case err != nil:
		s.respondError(m.ID, &rpcError{Code: codeInternalError, Message: err.Error()})
	default:
		s.respond(m.ID, result)
	}
}

func (s *server) handleNotification(m *message) {
	switch m.Method {
	case "notifications/cancelled":
		var c cancellation
		if err := json.Unmarshal(m.Params, &c); err != nil || c.RequestID == nil {
			s.log.Warn("malformed notifications/cancelled", "params", string(m.Params))
			return
		}
		s.mu.Lock()
		s.cancelled = append(s.cancelled, c)
		ch := s.cancelSignalLocked(c.RequestID)
		select {
		case <-ch:
		default:
			close(ch)
		}
		s.mu.Unlock()
	case "notifications/initialized":
		s.log.Debug("initialized")
	}
}

// cancelSignalLocked returns the channel closed when the request with id is
// cancelled. s.mu must be held.
func (s *server) cancelSignalLocked(id json.RawMessage) chan struct{} {
	key := idKey(id)
	ch, ok := s.cancelSignals[key]
	if !ok {
		ch = make(chan struct{})
		s.cancelSignals[key] = ch
	}
	return ch
}

// deliver hands a client's response to the server→client request awaiting it.
func (s *server) deliver(m *message) {
	key := idKey(m.ID)
	s.mu.Lock()
	ch, ok := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if !ok {
		s.log.Warn("dropping response with unknown id", "id", string(m.ID))
		return
	}
	ch <- m
}

// clientRequest sends a server→client request and waits for its response;
// it returns nil when stdin ends first. An empty id means a fresh "fakeserver-N".
func (s *server) clientRequest(method string, id, params json.RawMessage) *message {
	if len(id) == 0 {
		id = fmt.Appendf(nil, `"fakeserver-%d"`, s.nextID.Add(1))
	}
	ch := make(chan *message, 1)
	s.mu.Lock()
	s.pending[idKey(id)] = ch
	s.mu.Unlock()

	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%s`, id, quote(method))
	if len(params) > 0 {
		line = fmt.Appendf(line, `,"params":%s`, params)
	}
	s.writeLine(append(line, '}'))
	select {
	case m := <-ch:
		return m
	case <-s.eof:
		return nil
	}
}

// idKey is how ids are compared: the received bytes without insignificant space.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, id); err != nil {
		return string(id)
	}
	return b.String()
}

// respond writes a result. The id is spliced in exactly as received.
func (s *server) respond(id json.RawMessage, result any) {
	if result == nil {
		result = struct{}{}
	}
	body, err := marshal(result)
	if err != nil {
		s.respondError(id, &rpcError{Code: codeInternalError, Message: err.Error()})
		return
	}
	s.writeLine(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, body))
}

func (s *server) respondError(id json.RawMessage, e *rpcError) {
	body, err := marshal(e)
	if err != nil {
		body = fmt.Appendf(nil, `{"code":%d,"message":%s}`, codeInternalError, quote(err.Error()))
	}
	s.writeLine(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id, body))
}

// notify sends a notification; params may be nil.
func (s *server) notify(method string, params any) {
	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%s`, quote(method))
	if params != nil {
		body, err := marshal(params)
		if err != nil {
			s.log.Error("marshal notification", "method", method, "err", err)
			return
		}
		line = fmt.Appendf(line, `,"params":%s`, body)
	}
	s.writeLine(append(line, '}'))
}

// writeLine writes one message and its newline in a single write, unless the
// server hangs.
func (s *server) writeLine(line []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.hung {
		return
	}
	if _, err := s.out.Write(append(line, '\n')); err != nil {
		s.log.Error("write stdout", "err", err)
	}
}

// hang stops all further output.
func (s *server) hang() {
	s.outMu.Lock()
	s.hung = true
	s.outMu.Unlock()
}

// marshal encodes v without HTML escaping, so raw values pass unchanged.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func quote(s string) []byte {
	b, _ := marshal(s)
	return b
}

// methods is the table of request methods the server answers for opts.
func methods(opts *options) map[string]methodHandler {
	m := map[string]methodHandler{
		"initialize":       (*server).initialize,
		"ping":             func(*server, *message) (any, error) { return nil, nil },
		"tools/list":       (*server).listTools,
		"tools/call":       (*server).callTool,
		"logging/setLevel": (*server).setLogLevel,
	}
	switch opts.ping {
	case "never":
		m["ping"] = func(*server, *message) (any, error) { return nil, errNoReply }
	case "unknown":
		delete(m, "ping") // answered with -32601 like any unknown method
	}
	if opts.resources > 0 {
		m["resources/list"] = (*server).listResources
		m["resources/templates/list"] = (*server).listResourceTemplates
		m["resources/read"] = (*server).readResourceOrAsk
		m["resources/subscribe"] = (*server).subscribe
		m["resources/unsubscribe"] = (*server).unsubscribe
	}
	if opts.prompts {
		m["prompts/list"] = (*server).listPrompts
		m["prompts/get"] = (*server).getPromptOrAsk
		m["completion/complete"] = (*server).complete
	}
	return m
}

func (s *server) initialize(m *message) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams("initialize: %v", err)
	}
	version := latestProtocolVersion
	if slices.Contains([]string{"2025-11-25", "2025-06-18", "2025-03-26"}, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	if s.opts.noInitializeResponse {
		return nil, errNoReply
	}
	if s.opts.initializeBarrier > 0 {
		if err := s.awaitInitializeBarrier(); err != nil {
			return nil, err
		}
	}
	if s.opts.handshakeDelay > 0 {
		time.Sleep(s.opts.handshakeDelay)
	}
	if s.opts.listChangedBeforeInit {
		s.notify("notifications/tools/list_changed", nil)
	}
	caps := map[string]any{
		"tools":   map[string]any{"listChanged": true},
		"logging": struct{}{},
	}
	if s.opts.resources > 0 {
		caps["resources"] = map[string]any{"subscribe": true, "listChanged": true}
	}
	if s.opts.prompts {
		caps["prompts"] = map[string]any{"listChanged": true}
		caps["completions"] = struct{}{}
	}
	result := map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"serverInfo":      map[string]any{"name": s.opts.name, "version": "0.0.0-fake"},
	}
	if s.opts.instructions != "" {
		result["instructions"] = s.opts.instructions
	}
	return result, nil
}

func (s *server) setLogLevel(m *message) (any, error) {
	var p struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Level == "" {
		return nil, invalidParams("logging/setLevel needs a level")
	}
	s.mu.Lock()
	s.logLevel = p.Level
	s.mu.Unlock()
	return nil, nil
}

// page returns one page of items for the request's cursor and the next cursor.
func page[T any](s *server, params json.RawMessage, items []T) ([]T, string, error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, "", invalidParams("bad params: %v", err)
		}
	}
	start := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 || n > len(items) {
			return nil, "", invalidParams("invalid cursor %q", p.Cursor)
		}
		start = n
	}
	if s.opts.pageSize <= 0 || start+s.opts.pageSize >= len(items) {
		return items[start:], "", nil
	}
	end := start + s.opts.pageSize
	return items[start:end], strconv.Itoa(end), nil
}

// listResult builds a list result with its optional nextCursor.
func listResult(key string, items any, next string) map[string]any {
	r := map[string]any{key: items}
	if next != "" {
		r["nextCursor"] = next
	}
	return r
}

// awaitInitializeBarrier waits until the record file, which other servers
// may share, holds --initialize-barrier initialize requests. Ours is in it
// already: lines are recorded before they are handled. It gives up when
// stdin ends, as nothing could use the answer any more.
func (s *server) awaitInitializeBarrier() error {
	for {
		data, err := os.ReadFile(s.opts.record)
		if err != nil {
			return fmt.Errorf("initialize barrier: %w", err)
		}
		n := 0
		for _, line := range bytes.Split(data, []byte("\n")) {
			var m message
			if json.Unmarshal(line, &m) == nil && m.Method == "initialize" && m.ID != nil {
				n++
			}
		}
		if n >= s.opts.initializeBarrier {
			return nil
		}
		select {
		case <-s.eof:
			return errNoReply
		case <-time.After(5 * time.Millisecond): // a file has no change event to await portably
		}
	}
}
