package journal

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Markers BackendLog puts on the pieces of a line longer than MaxLineBytes:
// a piece that continues in the next entry ends with ContinuedMarker, a piece
// that continues the previous entry starts with ContinuationMarker, so a
// 200 KiB line reads "AAA… [continued]", "[continuation] BBB… [continued]",
// "[continuation] CCC…".
const (
	ContinuedMarker    = " [continued]"
	ContinuationMarker = "[continuation] "
)

// DefaultQueueSize is how many entries a BackendLog holds for its writer
// goroutine when BackendLogOptions.QueueSize is zero.
const DefaultQueueSize = 1024

// retryDelay is how long a BackendLog drops lines (counting them) after a
// failed journal write before it tries the journal again.
const retryDelay = time.Second

// RateLimit is a token bucket: at most Burst lines at once, refilled at
// Burst lines per Interval. Burst 0 (or Interval 0) means unlimited. It has
// the shape of config.RateLimit, so journal.RateLimit(cfg) converts one.
type RateLimit struct {
	Burst    int
	Interval time.Duration
}

// String returns the limit as config writes it, "1000/10s", or "off".
func (r RateLimit) String() string {
	if r.Burst <= 0 || r.Interval <= 0 {
		return "off"
	}
	return fmt.Sprintf("%d/%s", r.Burst, r.Interval)
}

// BackendLogOptions configure NewBackendLog.
type BackendLogOptions struct {
	// Backend is the backend's name: SYSLOG_IDENTIFIER=mcpgate-<Backend>
	// and MCPGATE_BACKEND=<Backend>.
	Backend string
	// Instance, when not "", is written as MCPGATE_INSTANCE.
	Instance string
	// Prerequisite marks the output of the backend's prerequisite process
	// (MCPGATE_PREREQUISITE=1) rather than of the backend itself.
	Prerequisite bool
	// PID is the child's pid for MCPGATE_BACKEND_PID until SetPID; 0 omits
	// the field.
	PID int
	// RateLimit limits the entries written for the backend's stderr lines
	// and MCP log messages together.
	RateLimit RateLimit
	// QueueSize is how many entries may wait for the journal; 0 means
	// DefaultQueueSize.
	QueueSize int
	// ErrorLog, when set, is told once when journal writes start failing
	// (and again after they recovered and failed anew).
	ErrorLog *slog.Logger
}

// BackendLog writes what one backend says — its stderr lines and its MCP
// notifications/message — to the journal, one entry each. Its methods never
// block the caller on the journal: entries go through a bounded queue to a
// writer goroutine. Lines that exceed the rate limit, find the queue full, or
// cannot be written because the journal fails are counted as suppressed, and
// when writing resumes one entry (MESSAGE_ID MessageSuppressed, PRIORITY 4,
// MCPGATE_SUPPRESSED=N) says "N lines suppressed", at most once per rate
// limit interval (once a second when unlimited). Every entry carries
// SYSLOG_IDENTIFIER=mcpgate-<backend>, MCPGATE_BACKEND, MCPGATE_BACKEND_PID
// (when known) and MCPGATE_INSTANCE (when set).
//
// Line and MCPMessage may be called from several goroutines; lines keep the
// order of the calls.
type BackendLog struct {
	w          *Writer
	errorLog   *slog.Logger
	backend    string
	static     []byte // serialised fields every entry starts with
	queue      chan logItem
	wake       chan struct{} // a suppression episode started
	stop       chan struct{}
	done       chan struct{}
	summaryGap time.Duration
	limit      RateLimit

	mu          sync.Mutex
	closed      bool
	pid         int
	continuing  bool // the last Line was partial
	contPrio    int  // priority of the line being continued
	bucket      tokenBucket
	pending     suppressed // not yet reported in a summary entry
	total       uint64     // ever suppressed
	nextSummary time.Time

	// Owned by the writer goroutine.
	timer     *time.Timer
	downUntil time.Time // drop instead of writing until then
	down      bool      // the last write failed
	reported  bool      // the current failure was told to errorLog
	closing   bool
}

// suppressed counts lines not written, by reason.
type suppressed struct {
	rate, queue, lost uint64
}

func (s suppressed) total() uint64 { return s.rate + s.queue + s.lost }

func (s *suppressed) add(o suppressed) {
	s.rate += o.rate
	s.queue += o.queue
	s.lost += o.lost
}

type logItem struct {
	msg     []byte          // MESSAGE of a stderr line
	mcp     json.RawMessage // params of an MCP notifications/message instead
	prio    int
	pid     int
	summary suppressed // to report before this item
}

// NewBackendLog starts the writer goroutine for one backend's log entries,
// written with w (which must not be nil and may be shared); Close stops it.
func NewBackendLog(w *Writer, opts BackendLogOptions) *BackendLog {
	size := opts.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	var static Entry
	static.Add("SYSLOG_IDENTIFIER", "mcpgate-"+opts.Backend)
	static.Add("MCPGATE_BACKEND", opts.Backend)
	if opts.Instance != "" {
		static.Add("MCPGATE_INSTANCE", opts.Instance)
	}
	if opts.Prerequisite {
		static.Add("MCPGATE_PREREQUISITE", "1")
	}
	l := &BackendLog{
		w:          w,
		errorLog:   opts.ErrorLog,
		backend:    opts.Backend,
		static:     static.buf,
		queue:      make(chan logItem, size),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		summaryGap: time.Second,
		limit:      opts.RateLimit,
		pid:        opts.PID,
		bucket:     newTokenBucket(opts.RateLimit),
		timer:      time.NewTimer(time.Hour),
	}
	l.timer.Stop()
	if !l.bucket.unlimited() {
		l.summaryGap = opts.RateLimit.Interval
	}
	go l.run()
	return l
}

// SetPID sets MCPGATE_BACKEND_PID for the lines that follow, for a new
// incarnation of the backend's process; 0 omits the field. A new pid ends
// a long line being continued; the same pid again changes nothing, so a
// caller may set it before every line.
func (l *BackendLog) SetPID(pid int) {
	l.mu.Lock()
	if pid != l.pid {
		l.pid = pid
		l.continuing = false
	}
	l.mu.Unlock()
}

// Line writes one stderr line, without its newline, as an entry whose
// PRIORITY comes from ParsePriority (a "<N>" prefix is stripped). partial
// means the line was longer than the reader's limit and continues in the next
// call: the entry ends with ContinuedMarker, and the next one starts with
// ContinuationMarker and keeps this line's priority. Line copies what it
// keeps; after Close it does nothing.
func (l *BackendLog) Line(line []byte, partial bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	cont := l.continuing
	l.continuing = partial
	prio, msg := l.contPrio, line
	if !cont {
		prio, msg = ParsePriority(line)
		l.contPrio = prio
	}
	now, ok := l.admitLocked()
	if !ok {
		return
	}
	l.pushLocked(logItem{msg: withMarkers(msg, cont, partial), prio: prio, pid: l.pid}, now)
}

// MCPMessage writes the params of an MCP notifications/message the backend
// sent, as ParseMCPLog reads them: MESSAGE is the data, PRIORITY maps the
// level (debug 7 … emergency 0), MCPGATE_LOGGER names the logger when there
// is one. Params that do not parse are written raw at priority 6. It shares
// the rate limit and queue with Line, copies params, and never blocks.
func (l *BackendLog) MCPMessage(params json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	now, ok := l.admitLocked()
	if !ok {
		return
	}
	l.pushLocked(logItem{mcp: append(json.RawMessage(nil), params...), pid: l.pid}, now)
}

// Suppressed returns how many lines and messages were suppressed so far.
func (l *BackendLog) Suppressed() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Close writes what is queued, then the summary of suppressed lines if any,
// and stops the writer goroutine. While the journal fails it drops the
// queue instead, so Close returns within about twice the Writer's timeout.
// It does not close the Writer. Calling it again waits for the first call.
func (l *BackendLog) Close() {
	l.mu.Lock()
	first := !l.closed
	l.closed = true
	l.mu.Unlock()
	if first {
		close(l.stop)
	}
	<-l.done
}

// admitLocked applies the rate limit and the queue bound; when the item may
// not be queued it counts it as suppressed.
func (l *BackendLog) admitLocked() (now time.Time, ok bool) {
	if !l.bucket.unlimited() || l.pending.total() > 0 {
		now = time.Now()
	}
	if len(l.queue) == cap(l.queue) {
		l.suppressLocked(&l.pending.queue)
		return now, false
	}
	if !l.bucket.take(now) {
		l.suppressLocked(&l.pending.rate)
		return now, false
	}
	return now, true
}

// pushLocked queues it, which cannot block: only holders of l.mu send and
// admitLocked saw room. The first item after a suppression takes the count
// to report, if a summary is due.
func (l *BackendLog) pushLocked(it logItem, now time.Time) {
	if l.pending.total() > 0 && !now.Before(l.nextSummary) {
		it.summary = l.pending
		l.pending = suppressed{}
		l.nextSummary = now.Add(l.summaryGap)
	}
	l.queue <- it
}

func (l *BackendLog) suppressLocked(counter *uint64) {
	start := l.pending.total() == 0
	*counter++
	l.total++
	if start {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func withMarkers(msg []byte, cont, partial bool) []byte {
	n := len(msg)
	if cont {
		n += len(ContinuationMarker)
	}
	if partial {
		n += len(ContinuedMarker)
	}
	b := make([]byte, 0, n)
	if cont {
		b = append(b, ContinuationMarker...)
	}
	b = append(b, msg...)
	if partial {
		b = append(b, ContinuedMarker...)
	}
	return b
}

// run is the writer goroutine.
func (l *BackendLog) run() {
	defer close(l.done)
	var e Entry
	for {
		select {
		case it := <-l.queue:
			l.writeItem(&e, it)
		case <-l.wake:
			l.armSummary()
		case <-l.timer.C:
			l.flushSummary(&e)
		case <-l.stop:
			// Try the journal once more even within retryDelay; if that
			// fails, closing makes send drop the rest at once.
			l.closing, l.down = true, false
			l.timer.Stop()
			for len(l.queue) > 0 { // Line and MCPMessage no longer send
				l.writeItem(&e, <-l.queue)
			}
			l.mu.Lock()
			s := l.pending
			l.pending = suppressed{}
			l.mu.Unlock()
			if s.total() > 0 {
				l.writeSummary(&e, s)
			}
			return
		}
	}
}

// armSummary sets the timer for when a summary may be written: the rate
// limit lets a line through again, the summary gap has passed, and the
// journal is not known to fail.
func (l *BackendLog) armSummary() {
	now := time.Now()
	l.mu.Lock()
	if l.pending.total() == 0 {
		l.mu.Unlock()
		return
	}
	due := l.nextSummary
	if t := now.Add(l.bucket.untilToken(now)); t.After(due) {
		due = t
	}
	l.mu.Unlock()
	if l.downUntil.After(due) {
		due = l.downUntil
	}
	l.timer.Reset(due.Sub(now))
}

// flushSummary writes the summary when no line took it in the meantime. The
// entries queued before it go first, so the summary follows what was
// written before the suppression.
func (l *BackendLog) flushSummary(e *Entry) {
	for n := len(l.queue); n > 0; n-- {
		l.writeItem(e, <-l.queue)
	}
	now := time.Now()
	l.mu.Lock()
	if l.pending.total() == 0 {
		l.mu.Unlock()
		return
	}
	due := l.nextSummary
	if l.downUntil.After(due) {
		due = l.downUntil
	}
	if now.Before(due) {
		l.mu.Unlock()
		l.timer.Reset(due.Sub(now))
		return
	}
	s := l.pending
	l.pending = suppressed{}
	l.nextSummary = now.Add(l.summaryGap)
	l.mu.Unlock()
	l.writeSummary(e, s)
}

func (l *BackendLog) writeItem(e *Entry, it logItem) {
	if it.summary.total() > 0 {
		l.writeSummary(e, it.summary)
	}
	l.begin(e, it.pid)
	if it.mcp != nil {
		m, err := ParseMCPLog(it.mcp)
		if err != nil {
			e.Add("PRIORITY", strconv.Itoa(PriInfo))
			e.AddBytes("MESSAGE", it.mcp)
		} else {
			e.Add("PRIORITY", strconv.Itoa(m.Priority))
			e.Add("MESSAGE", m.Message)
			if m.Logger != "" {
				e.Add("MCPGATE_LOGGER", m.Logger)
			}
		}
	} else {
		e.Add("PRIORITY", strconv.Itoa(it.prio))
		e.AddBytes("MESSAGE", it.msg)
	}
	l.send(e, suppressed{lost: 1}, true)
}

func (l *BackendLog) writeSummary(e *Entry, s suppressed) {
	l.mu.Lock()
	pid := l.pid
	l.mu.Unlock()
	l.begin(e, pid)
	e.Add("PRIORITY", strconv.Itoa(PriWarning))
	e.Add("MESSAGE_ID", string(MessageSuppressed))
	e.Add("MCPGATE_SUPPRESSED", strconv.FormatUint(s.total(), 10))
	e.Add("MESSAGE", l.summaryText(s))
	l.send(e, s, false)
}

func (l *BackendLog) summaryText(s suppressed) string {
	var b strings.Builder
	n := s.total()
	if n == 1 {
		b.WriteString("1 line suppressed (")
	} else {
		fmt.Fprintf(&b, "%d lines suppressed (", n)
	}
	sep := ""
	if s.rate > 0 {
		fmt.Fprintf(&b, "rate limit %d per %s: %d", l.limit.Burst, l.limit.Interval, s.rate)
		sep = ", "
	}
	if s.queue > 0 {
		fmt.Fprintf(&b, "%squeue full: %d", sep, s.queue)
		sep = ", "
	}
	if s.lost > 0 {
		fmt.Fprintf(&b, "%sjournal write failed: %d", sep, s.lost)
	}
	b.WriteByte(')')
	return b.String()
}

func (l *BackendLog) begin(e *Entry, pid int) {
	e.Reset()
	e.buf = append(e.buf, l.static...)
	if pid > 0 {
		e.buf = append(e.buf, "MCPGATE_BACKEND_PID="...)
		e.buf = strconv.AppendInt(e.buf, int64(pid), 10)
		e.buf = append(e.buf, '\n')
	}
}

// send writes e unless the journal recently failed. When e is not written,
// s (a lost line, or the counts of a summary) goes back to the pending
// suppressions so a later summary reports it; fresh says s was not counted
// yet.
func (l *BackendLog) send(e *Entry, s suppressed, fresh bool) {
	if l.down && (l.closing || time.Now().Before(l.downUntil)) {
		l.unwritten(s, fresh)
		return
	}
	err := l.w.Send(e)
	if err == nil {
		l.down, l.reported = false, false
		return
	}
	l.down = true
	l.downUntil = time.Now().Add(retryDelay)
	if !l.reported && l.errorLog != nil {
		l.reported = true
		l.errorLog.Warn("journal write failed; backend log lines are counted and dropped until it works again",
			"backend", l.backend, "socket", l.w.Socket(), "error", err)
	}
	l.unwritten(s, fresh)
}

func (l *BackendLog) unwritten(s suppressed, fresh bool) {
	l.mu.Lock()
	start := l.pending.total() == 0
	l.pending.add(s)
	if fresh {
		l.total += s.total()
	}
	l.mu.Unlock()
	if start && !l.closing {
		l.armSummary()
	}
}

// tokenBucket is the rate limiter; the zero value is unlimited.
type tokenBucket struct {
	burst  float64
	perNs  float64 // tokens added per nanosecond
	tokens float64
	last   time.Time
}

func newTokenBucket(r RateLimit) tokenBucket {
	if r.Burst <= 0 || r.Interval <= 0 {
		return tokenBucket{}
	}
	return tokenBucket{
		burst:  float64(r.Burst),
		perNs:  float64(r.Burst) / float64(r.Interval),
		tokens: float64(r.Burst),
	}
}

func (b *tokenBucket) unlimited() bool { return b.burst == 0 }

func (b *tokenBucket) refill(now time.Time) {
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+float64(now.Sub(b.last))*b.perNs)
	}
	b.last = now
}

func (b *tokenBucket) take(now time.Time) bool {
	if b.unlimited() {
		return true
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// untilToken is how long until take can succeed.
func (b *tokenBucket) untilToken(now time.Time) time.Duration {
	if b.unlimited() {
		return 0
	}
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1-b.tokens)/b.perNs) + 1
}
