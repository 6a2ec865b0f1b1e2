package front

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// traceContext is r's context with the trace context of its traceparent
// and tracestate headers, the parent of its requests' spans unless their
// _meta names another; r's context itself without telemetry.
func (h *Handler) traceContext(r *http.Request) context.Context {
	if h.opts.Telemetry == nil {
		return r.Context()
	}
	return h.opts.Telemetry.Extract(r.Context(), r.Header)
}

// failOp ends op with the error that refused its request.
func failOp(op *telemetry.Op, err error) {
	if op == nil {
		return
	}
	e := jsonrpc.AsError(err)
	var le *access.LimitError
	if errors.As(err, &le) {
		e = jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "%s", le.Error()) // as limitError answers it
	}
	op.Fail(strconv.Itoa(e.Code), e.Code, e.Message)
}
