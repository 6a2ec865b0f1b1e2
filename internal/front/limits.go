package front

import (
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Refusals for load are journaled per client at most
// overloadWarningsPerClient times a minute and overloadWarnings in all, the
// rest counted: a client that floods the gateway cannot also flood the
// journal.
const (
	overloadWarningsPerClient = 5
	overloadWarnings          = 20
	overloadClients           = 256
)

// warnRefused journals a refusal for load of r's client, rate-limited.
func (h *Handler) warnRefused(r *http.Request, msg string, attrs ...any) {
	client := clientOf(r).Name
	log, suppressed, last := h.overloads.Allow(client, time.Now())
	if !log {
		return
	}
	attrs = append(attrs, "client", client)
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if last {
		attrs = append(attrs, "note", "further refusals of this client for load within a minute are counted, not logged")
	}
	h.log.Warn(msg, attrs...)
}

// retryAfterSeconds is what a refused client is told to wait before it
// tries again (Retry-After).
const retryAfterSeconds = 1

// acquire takes one of the max_concurrent_requests slots, or answers the
// request with HTTP 503 and returns false. release gives the slot back.
func (h *Handler) acquire(w http.ResponseWriter, r *http.Request) bool {
	if h.slots == nil {
		return true
	}
	select {
	case h.slots <- struct{}{}:
		return true
	default:
		h.warnRefused(r, "refused a request: max_concurrent_requests reached", "max_concurrent_requests", cap(h.slots))
		h.overloaded(w, nil, "the gateway is already processing %d requests (max_concurrent_requests); retry in a moment", cap(h.slots))
		return false
	}
}

func (h *Handler) release() {
	if h.slots != nil {
		<-h.slots
	}
}

// overloaded answers with HTTP 503, Retry-After and a JSON-RPC error with
// gateway.CodeOverloaded: a refusal that says what limit was reached and
// when to try again.
func (h *Handler) overloaded(w http.ResponseWriter, id []byte, format string, args ...any) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	h.rpcError(w, http.StatusServiceUnavailable, id, gateway.CodeOverloaded, format, args...)
}

// admitBatch counts the messages of a batch of n against every limit each
// would count against alone: max_batch_size bounds n; the POST took one
// max_concurrent_requests slot and one token of the client's rate_limit,
// and the other n-1 messages take theirs, all or none. Refused, the batch
// is answered here with what refused it, and admitBatch returns false;
// admitted, the caller releases the n-1 slots with releaseN.
func (h *Handler) admitBatch(w http.ResponseWriter, r *http.Request, n int) bool {
	if max := h.opts.MaxBatchSize; max > 0 && n > max {
		h.warnRefused(r, "refused a batch: max_batch_size exceeded", "messages", n, "max_batch_size", max)
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
			"invalid request: a batch of %d messages exceeds max_batch_size (%d); send fewer messages at once", n, max)
		return false
	}
	if c := clientOf(r); c.Limit != nil && n > 1 {
		if ok, wait := c.Limit.TakeN(time.Now(), n-1); !ok {
			h.limitError(w, &access.LimitError{Client: c.Name, What: "rate_limit", Limit: c.Limit.String(), RetryAfter: wait}, nil)
			return false
		}
	}
	if !h.acquireN(n - 1) {
		h.warnRefused(r, "refused a batch: max_concurrent_requests reached", "messages", n, "max_concurrent_requests", cap(h.slots))
		h.overloaded(w, nil, "a batch of %d messages needs as many of the %d max_concurrent_requests slots, and too few are free; retry in a moment or send fewer at once", n, cap(h.slots))
		return false
	}
	return true
}

// acquireN takes n max_concurrent_requests slots without waiting, or none.
func (h *Handler) acquireN(n int) bool {
	if h.slots == nil {
		return true
	}
	for i := range n {
		select {
		case h.slots <- struct{}{}:
		default:
			h.releaseN(i)
			return false
		}
	}
	return true
}

// releaseN gives back n slots.
func (h *Handler) releaseN(n int) {
	for range n {
		h.release()
	}
}
