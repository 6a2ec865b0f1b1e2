package access

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// Refusals journals refused callers and slows down peers that keep
// failing. Per peer and window, the first few refusals are logged one by
// one; the rest are counted and summed up in the next entry. Each failure
// beyond the first few delays the answer, doubling up to a maximum.
type Refusals struct {
	log *slog.Logger

	mu    sync.Mutex
	peers map[string]*failures
}

type failures struct {
	since      time.Time // start of the current window
	count      int       // refusals in the window
	suppressed int       // refusals in the window not logged
}

// Bounds of the refusal bookkeeping.
const (
	refusalWindow  = time.Minute
	refusalsLogged = 5                      // per peer and window
	refusalsFree   = 3                      // refusals before answers slow down
	refusalDelay   = 100 * time.Millisecond // first delay, doubled per refusal
	maxDelay       = 2 * time.Second
	maxPeers       = 4096 // peers remembered; beyond it the oldest windows are forgotten
)

// NewRefusals returns a Refusals logging to log.
func NewRefusals(log *slog.Logger) *Refusals {
	return &Refusals{log: log, peers: map[string]*failures{}}
}

// Refused journals a refusal of peer and returns how long to wait before
// answering it.
func (r *Refusals) Refused(peer Peer, ref *Refusal, method, path string) time.Duration {
	logIt, suppressed, count := r.count(peer.key())
	if logIt {
		attrs := []any{"peer", peer.String(), "http_status", ref.Status, "reason", ref.Reason, "http_method", method, "path", path, journal.MessageAccessDenied.Attr()}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
		if count == refusalsLogged {
			attrs = append(attrs, "note", "further refusals of this peer within a minute are counted, not logged")
		}
		r.log.Warn("refused a caller: "+ref.Reason, attrs...)
	}
	if count <= refusalsFree {
		return 0
	}
	return min(refusalDelay<<min(count-refusalsFree-1, 10), maxDelay)
}

// count counts a refusal of key in its window and reports whether to log
// it, how many refusals before it were not logged, and how many the window
// has seen.
func (r *Refusals) count(key string) (logIt bool, suppressed, count int) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.peers[key]
	switch {
	case f == nil:
		if len(r.peers) >= maxPeers {
			r.forgetOld(now)
		}
		f = &failures{since: now}
		r.peers[key] = f
	case now.Sub(f.since) > refusalWindow:
		// A new window; what was suppressed is reported with its first
		// entry.
		f.since, f.count = now, 0
	}
	f.count++
	logIt = f.count <= refusalsLogged
	if logIt {
		suppressed, f.suppressed = f.suppressed, 0
	} else {
		f.suppressed++
	}
	return logIt, suppressed, f.count
}

// Who names the caller of a refused request for the journal: its client,
// the identity that authenticated as it (Caller.Identity), and its
// session, or the identifier of a stateless request.
type Who struct {
	Client, Identity, Session, Request string
}

func (w Who) attrs() []any {
	attrs := []any{"client", w.Client, "identity", w.Identity, "session", w.Session}
	if w.Request != "" {
		attrs = append(attrs, "request", w.Request)
	}
	return attrs
}

// Hidden journals that client's policy refused a call of method on a
// tool, prompt or resource (what: "tool", "prompt" or "uri") it hides:
// the client got the error of an unknown name, the operator learns which
// rule decided. Per client and window the first few are logged, the rest
// counted, as Refused does for peers; no answer is delayed. ctx names
// the call's span, if it is traced, for the entry's TRACE_ID=.
func (r *Refusals) Hidden(ctx context.Context, who Who, method, what, name, rule string) {
	client := who.Client
	logIt, suppressed, count := r.count("client " + client)
	if !logIt {
		return
	}
	attrs := append(who.attrs(), "method", method, what, name, "reason", rule, journal.MessageAccessDenied.Attr())
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if count == refusalsLogged {
		attrs = append(attrs, "note", "further policy refusals of this client within a minute are counted, not logged")
	}
	r.log.WarnContext(ctx, fmt.Sprintf("refused client %q: %s %s: %s", client, method, name, rule), attrs...)
}

// Ambiguous journals that client sent a message with a member the
// gateway decides on repeated or spelled in another case (err says
// which): a request was refused with -32600, a notification dropped. It
// counts in the client's window with the policy refusals. ctx is as
// Hidden's.
func (r *Refusals) Ambiguous(ctx context.Context, who Who, method string, err error) {
	client := who.Client
	logIt, suppressed, count := r.count("client " + client)
	if !logIt {
		return
	}
	attrs := append(who.attrs(), "method", method, "reason", err.Error(), journal.MessageAccessDenied.Attr())
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if count == refusalsLogged {
		attrs = append(attrs, "note", "further policy refusals of this client within a minute are counted, not logged")
	}
	r.log.WarnContext(ctx, fmt.Sprintf("refused client %q: %s with an ambiguous member", client, method), attrs...)
}

// RequestState journals that client's retry of method brought a
// requestState the gateway refused (reason: expired, tampered, replayed,
// other-client, …; err says why in words): the retry got -32602 and
// reached no backend. It counts in the client's window with the policy
// refusals. ctx is as Hidden's.
func (r *Refusals) RequestState(ctx context.Context, who Who, method, reason string, err error) {
	client := who.Client
	logIt, suppressed, count := r.count("client " + client)
	if !logIt {
		return
	}
	attrs := append(who.attrs(), "method", method, "reason", reason, "err", err.Error(), journal.MessageAccessDenied.Attr())
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if count == refusalsLogged {
		attrs = append(attrs, "note", "further policy refusals of this client within a minute are counted, not logged")
	}
	r.log.WarnContext(ctx, fmt.Sprintf("refused client %q: %s with requestState %s", client, method, reason), attrs...)
}

// forgetOld drops windows that ended; if none did, all of them. Called
// with r.mu held.
func (r *Refusals) forgetOld(now time.Time) {
	for k, f := range r.peers {
		if now.Sub(f.since) > refusalWindow {
			delete(r.peers, k)
		}
	}
	if len(r.peers) >= maxPeers {
		clear(r.peers)
	}
}

// Wait sleeps for d or until ctx ends.
func Wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
