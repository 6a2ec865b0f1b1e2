package front

import (
	"net/http"
)

// HealthPath is where a load balancer asks whether this host takes new
// sessions.
const HealthPath = "/healthz"

// HealthFunc reports whether the host takes new sessions and, when it does
// not, a one-word reason for an anonymous caller: "starting", "draining" or
// "no healthy backend". The reason names no backend.
type HealthFunc func() (ok bool, reason string)

// health answers GET and HEAD on HealthPath: 200 "ok" while the host takes
// new sessions, else 503 and the reason. It needs no token and skips the
// Host and Origin checks: its answer is one of four fixed words, which tell
// a caller nothing about backends, clients or sessions, and a balancer
// probes by address, not by a name listed in allowed_hosts.
func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: "+HealthPath+" answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	ok, reason := h.opts.Health()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(reason + "\n"))
		return
	}
	w.Write([]byte("ok\n"))
}
