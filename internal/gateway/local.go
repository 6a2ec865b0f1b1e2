package gateway

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/clitool"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// localState is what the gateway needs for the tools it runs itself:
// composites and the tools of cli backends.
type localState struct {
	// localCtx ends with Close: every cli program and composite still
	// running is then killed or abandoned.
	localCtx    context.Context
	localCancel context.CancelFunc
	locals      sync.Map       // localKey → context.CancelFunc of a local call in flight
	localRuns   sync.WaitGroup // local calls running; Close waits for them
}

// closeLocal cancels every local call and waits until they ended: their
// programs are killed and reaped.
func (l *localState) closeLocal() {
	l.localCancel()
	l.localRuns.Wait()
}

// localKey names a local call: its session and the client's raw id.
type localKey struct {
	sess *Session
	id   string
}

// cancelLocal cancels the session's local call with the client's id, as
// notifications/cancelled asks: it ends without a response.
func (g *Gateway) cancelLocal(s *Session, id json.RawMessage) {
	if cancel, ok := g.locals.Load(localKey{s, string(id)}); ok {
		cancel.(context.CancelFunc)()
	}
}

// cancelLocals cancels every local call of a session that ends.
func (g *Gateway) cancelLocals(s *Session) {
	g.locals.Range(func(k, v any) bool {
		if k.(localKey).sess == s {
			v.(context.CancelFunc)()
		}
		return true
	})
}

func (l *localState) init() {
	l.localCtx, l.localCancel = context.WithCancel(context.Background())
}

// callLocal answers a tools/call of a tool the gateway runs itself: a
// composite, or a tool of a cli backend. It reports false for tools that
// are forwarded to a backend's child.
// then, if set, learns the outcome as forwardThen's does.
func (s *Session) callLocal(msg *jsonrpc.Message, stream *Stream, tool *catalog.Entry, then func(ok bool, size int)) bool {
	if tool.Backend == compositeOwner {
		s.callComposite(msg, stream, tool.Original, then)
		return true
	}
	b := s.g.registry.Backend(tool.Backend)
	if b == nil || !b.IsCLI() {
		return false
	}
	s.callCLI(msg, stream, b, tool.Original, then, nil)
	return true
}

// forwardCLI is forwardVia for a cli backend, which has no connection to
// forward on: a tools/call (one a fallback serves, or one that a reload
// made a cli backend's) runs its program, and any other request is
// refused.
func (s *Session) forwardCLI(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, params json.RawMessage, then func(ok bool, size int), fb *fallback) {
	name, _, err := stringParam(params, "name")
	if msg.Method != "tools/call" || err != nil {
		if then != nil {
			then(false, 0)
		}
		stream.push(errorResponse(msg.ID, jsonrpc.CodeMethodNotFound, "backend %q runs command-line tools; it does not serve %s", b.Name(), msg.Method), true)
		return
	}
	var from *backend.Backend
	if fb != nil && fb.primary != b {
		from = fb.primary
	}
	s.callCLI(msg, stream, b, name, then, from)
}

// runLocal runs fn for a local call on its own goroutine, counted as in
// flight like a forwarded call, and cancelled when the client abandons the
// stream or the gateway closes. fn's answer is pushed as the response, and
// then, if set, learns whether it was a result and its size.
func (s *Session) runLocal(msg *jsonrpc.Message, stream *Stream, then func(ok bool, size int), fn func(ctx context.Context) []byte) {
	g := s.g
	ctx, cancel := context.WithCancel(g.localCtx)
	key := localKey{s, string(msg.ID)}
	g.locals.Store(key, cancel)
	g.inflight.Add(1)
	g.localRuns.Add(1)
	stream.onAbandon(func() {
		cancel()
		s.StreamDone(stream)
	})
	go func() {
		defer g.localRuns.Done()
		defer g.callEnded()
		defer g.locals.Delete(key)
		defer cancel()
		resp := fn(ctx)
		if then != nil {
			m, err := jsonrpc.Parse(resp)
			then(err == nil && m.Error == nil && ctx.Err() == nil, len(resp))
		}
		if ctx.Err() != nil && g.localCtx.Err() == nil {
			stream.drop() // the client is gone
			return
		}
		stream.push(resp, true)
	}()
}

// callCLI runs a cli backend's tool; the result of a fallback for the
// backend from (nil for none) says it served the call (servedBy).
func (s *Session) callCLI(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, name string, then func(ok bool, size int), from *backend.Backend) {
	fallback := from != nil
	refuse := func(err error) {
		if then != nil {
			then(false, 0)
		}
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true)
	}
	if b.State() != backend.Healthy {
		refuse(jsonrpc.Errorf(CodeBackendUnavailable, "%v", unavailable(b)))
		return
	}
	// The catalog the caller routed by may be older than the backend: a
	// reload may have removed the tool meanwhile.
	if b.Config().Tools[name] == nil {
		refuse(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown tool %q: backend %q no longer has it", name, b.Name()))
		return
	}
	args, _, _ := jsonrpc.Lookup(msg.Params, "arguments")
	opts := clitool.Options{Env: backend.MinimalEnv(os.Environ(), b.Config().InheritEnv), MaxOutputBytes: s.g.maxMessageBytes(), ReservedEnvVars: config.ReservedEnv()}
	var op *telemetry.Op
	if s.g.opts.Telemetry != nil {
		// A program's run is the message a cli backend gets.
		op = s.clientOp(msg.ID, msg.Method, stream, b, nil, msg.Params, forwardedParams{}, nil)
		op.SetTool(name)
		op.SetTransport("pipe")
		if fallback {
			op.SetFallback(from.Name())
		}
	}
	s.runLocal(msg, stream, then, func(ctx context.Context) []byte {
		// The backend's call limits apply to each invocation; waiting in
		// line ends with the call when its client goes away.
		adm, err := b.Admit(ctx, true)
		if err != nil {
			op.Fail(telemetry.ErrUnavailable, admitCode(err), err.Error())
			return jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(asRPCError(CodeBackendUnavailable, err)))
		}
		result, err := b.CallCLI(ctx, name, args, opts)
		if err != nil {
			adm.Done("error")
			e := jsonrpc.AsError(err)
			op.Fail(strconv.Itoa(e.Code), e.Code, e.Message)
			return jsonrpc.AppendError(nil, msg.ID, e)
		}
		adm.Done("ok")
		op.EndResult(nil, result, nil)
		result = s.g.processOutput(b.Name(), name, result)
		if fallback {
			result = servedBy(result, b.Name())
		}
		return jsonrpc.AppendResult(nil, msg.ID, result)
	})
}

// maxMessageBytes is the configured bound of one message.
func (g *Gateway) maxMessageBytes() int64 {
	if st := g.settings.Load(); st != nil && st.maxMessageBytes > 0 {
		return st.maxMessageBytes
	}
	return config.Default().Gateway.MaxMessageBytes
}

// rawJSON encodes values that always encode.
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("gateway: " + err.Error())
	}
	return b
}
