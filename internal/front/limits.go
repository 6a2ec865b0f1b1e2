package front

import (
	"net/http"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/gateway"
)

// retryAfterSeconds is what a refused client is told to wait before it
// tries again (Retry-After).
const retryAfterSeconds = 1

// acquire takes one of the max_concurrent_requests slots, or answers the
// request with HTTP 503 and returns false. release gives the slot back.
func (h *Handler) acquire(w http.ResponseWriter) bool {
	if h.slots == nil {
		return true
	}
	select {
	case h.slots <- struct{}{}:
		return true
	default:
		h.log.Warn("refused a request: max_concurrent_requests reached", "max_concurrent_requests", cap(h.slots))
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
