package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// pool runs the instances of a backend with instance = "session": each
// client session that uses the backend gets a child of its own, which no
// other session ever uses. The pool's entry is the Backend the catalog, the
// gateway and D-Bus see; every instance is a Backend of its own, with its
// own child, restarts and health, numbered from 1 ("NAME-N").
type pool struct {
	b *Backend // the entry

	mu       sync.Mutex
	ctx      context.Context // parent of every instance's Run; set by run
	running  bool            // started, and not stopped by the operator
	failed   string          // why the pool gave up: an instance failed before it ever served
	next     int             // the number of the next instance
	insts    map[*Backend]*instance
	waiters  []*waiter   // sessions waiting for an instance, oldest first
	first    *Backend    // the instance whose handshake the catalog shows
	server   *ServerInfo // what first said about itself
	refill   *time.Timer
	allGone  chan struct{} // closed when insts becomes empty while stopping; see stopAll
	restarts int           // restarts of instances that are gone
}

// instance is the pool's record of one instance.
type instance struct {
	cancel   context.CancelCauseFunc
	bound    bool // handed to a session
	stopping bool
	served   bool // was healthy at least once
}

// errSessionEnded is why an instance is stopped when its session ends.
var errSessionEnded = errors.New("its session ended")

// waiter is a session waiting for an instance.
type waiter struct {
	owner any
	ch    chan *Backend // receives the instance, or nil when the pool stops
}

func newPool(b *Backend) *pool {
	return &pool{b: b, insts: map[*Backend]*instance{}}
}

// InstanceStatus describes one instance of a pool.
type InstanceStatus struct {
	Number int    // N of NAME-N
	Unit   string // NAME-N
	PID    int    // 0 while no child runs
	State  State
	Owner  any // the session it is bound to, nil while idle
}

// Pooled reports whether every session gets an instance of its own
// (instance = "session"); calls then go through Acquire, not Conn.
func (b *Backend) Pooled() bool { return b.lc.pool != nil }

// Instance returns the backend's number within its pool, 0 if it is not
// an instance.
func (b *Backend) Instance() int { return b.opts.Instance }

// InstanceName returns "NAME-N" for instance N of a pool, else the name. It
// is the name an instance's unit gets under a unit runner
// (mcpgate-backend@NAME-N.service).
func (b *Backend) InstanceName() string {
	if b.opts.Instance == 0 {
		return b.name
	}
	return b.name + "-" + strconv.Itoa(b.opts.Instance)
}

// instanceLabel is the MCPGATE_INSTANCE value: N, or "" when not an instance.
func (b *Backend) instanceLabel() string {
	if b.opts.Instance == 0 {
		return ""
	}
	return strconv.Itoa(b.opts.Instance)
}

// Serves reports whether inst is a live instance of b's pool: not stopped,
// and not left over from a pool that a reload replaced.
func (b *Backend) Serves(inst *Backend) bool {
	return b.lc.pool != nil && inst.lc.parent == b.lc.pool && inst.State() != Stopped
}

// Owner returns the session an instance is bound to, or nil.
func (b *Backend) Owner() any {
	if o := b.lc.owner.Load(); o != nil {
		return o.v
	}
	return nil
}

// Instances returns the instances of a pool, by number; nil for a backend
// that is not a pool.
func (b *Backend) Instances() []InstanceStatus {
	p := b.lc.pool
	if p == nil {
		return nil
	}
	p.mu.Lock()
	list := make([]*Backend, 0, len(p.insts))
	for ib := range p.insts {
		list = append(list, ib)
	}
	p.mu.Unlock()
	slices.SortFunc(list, func(x, y *Backend) int { return x.opts.Instance - y.opts.Instance })
	out := make([]InstanceStatus, len(list))
	for i, ib := range list {
		st := ib.Status()
		out[i] = InstanceStatus{Number: ib.opts.Instance, Unit: ib.InstanceName(), PID: st.PID, State: st.State, Owner: ib.Owner()}
	}
	return out
}

// Acquire binds an instance of a pool to owner and returns it: an idle one
// at once, else one started for it, waiting until ctx ends. The instance
// serves owner only, until Release.
func (b *Backend) Acquire(ctx context.Context, owner any) (*Backend, error) {
	p := b.lc.pool
	p.mu.Lock()
	if !p.running {
		p.mu.Unlock()
		return nil, ErrStopped
	}
	if p.failed != "" {
		p.mu.Unlock()
		return nil, fmt.Errorf("backend %q: %w: an instance could not start: %s", b.name, ErrStopped, p.failed)
	}
	w := &waiter{owner: owner, ch: make(chan *Backend, 1)}
	p.waiters = append(p.waiters, w)
	p.dispatch()
	p.grow(false)
	p.mu.Unlock()
	p.scheduleRefill()
	select {
	case ib := <-w.ch:
		return p.handed(ib)
	case <-ctx.Done():
	}
	p.mu.Lock()
	i := slices.Index(p.waiters, w)
	if i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
	}
	busy := p.countBound()
	p.mu.Unlock()
	if i < 0 {
		return p.handed(<-w.ch) // handed over as the wait ended
	}
	return nil, fmt.Errorf("backend %q: no instance became free within %s (pool_acquire_timeout); %d of at most %d instances (pool_max) are bound to sessions",
		b.name, b.cfg.PoolAcquireTimeout, busy, b.cfg.PoolMax)
}

func (p *pool) handed(ib *Backend) (*Backend, error) {
	if ib == nil {
		return nil, ErrStopped
	}
	p.b.changed() // NIdle and NBusy changed
	return ib, nil
}

// Release ends an instance's binding: the instance is stopped, the usual
// graceful way, and never serves anyone again; the pool refills after
// pool_replenish_delay.
func (b *Backend) Release() {
	p := b.lc.parent
	if p == nil {
		return
	}
	p.mu.Lock()
	if in := p.insts[b]; in != nil && !in.stopping {
		in.stopping = true
		in.cancel(errSessionEnded)
	}
	p.mu.Unlock()
	p.scheduleRefill()
	p.b.changed()
}

// dispatch hands idle instances to waiting sessions; p.mu must be held.
func (p *pool) dispatch() {
	for len(p.waiters) > 0 {
		ib := p.idleInstance()
		if ib == nil {
			return
		}
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.insts[ib].bound = true
		ib.lc.owner.Store(&ownerBox{w.owner})
		w.ch <- ib
	}
}

// idleInstance returns a healthy unbound instance with the lowest number,
// or nil; p.mu must be held.
func (p *pool) idleInstance() *Backend {
	var best *Backend
	for ib, in := range p.insts {
		if in.bound || in.stopping || ib.State() != Healthy {
			continue
		}
		if best == nil || ib.opts.Instance < best.opts.Instance {
			best = ib
		}
	}
	return best
}

func (p *pool) countBound() int {
	n := 0
	for _, in := range p.insts {
		if in.bound && !in.stopping {
			n++
		}
	}
	return n
}

// grow starts instances for the waiting sessions and, with idle, up to
// pool_min_idle unbound ones, within pool_max; p.mu must be held.
func (p *pool) grow(idle bool) {
	if !p.running || p.failed != "" {
		return
	}
	cfg := p.b.cfg
	unbound, total := 0, 0
	for _, in := range p.insts {
		if in.stopping {
			continue
		}
		total++
		if !in.bound {
			unbound++
		}
	}
	want := len(p.waiters)
	if idle {
		want += cfg.PoolMinIdle
	}
	if p.first == nil {
		want = max(want, 1) // the catalog needs one handshake
	}
	for ; unbound < want && total < cfg.PoolMax; unbound, total = unbound+1, total+1 {
		p.spawn()
	}
}

// spawn starts one more instance; p.mu must be held.
func (p *pool) spawn() {
	p.next++
	n := p.next
	opts := p.b.opts
	if opts.InstanceOptions != nil {
		opts = opts.InstanceOptions(n)
	}
	opts.Instance = n
	opts.CatalogCache, opts.InstanceOptions = "", nil
	opts.OnChange = p.changed
	ib := New(p.b.cfg, opts)
	ib.lc.parent = p
	ctx, cancel := context.WithCancelCause(p.ctx)
	p.insts[ib] = &instance{cancel: cancel}
	go func() {
		ib.Run(ctx)
		if opts.Release != nil {
			opts.Release()
		}
		p.removed(ib)
	}()
}

// removed forgets an instance whose Run returned.
func (p *pool) removed(ib *Backend) {
	p.mu.Lock()
	delete(p.insts, ib)
	p.restarts += ib.Status().Restarts
	p.grow(false) // a freed place may be what a waiting session needs
	if len(p.insts) == 0 && p.allGone != nil {
		close(p.allGone)
		p.allGone = nil
	}
	p.mu.Unlock()
	p.b.changed()
}

// changed follows an instance's state: a healthy one may serve a waiting
// session and gives the catalog its lists; one that gave up is replaced.
func (p *pool) changed(ib *Backend) {
	st := ib.Status()
	// Readiness (settled) comes after the entry's state is published:
	// whoever waited for it finds the pool healthy, or failed, in the
	// catalog it then builds.
	settle := false
	p.mu.Lock()
	in := p.insts[ib]
	if in == nil {
		p.mu.Unlock()
		return
	}
	switch st.State {
	case Healthy:
		in.served = true
		if ib.Conn() == nil {
			break // being stopped: its lists are gone already
		}
		if p.first == nil || p.first == ib {
			p.first, p.server = ib, st.Server
			p.b.lists.Store(ib.Lists())
		} else if !sameLists(p.b.Lists(), ib.Lists()) {
			ib.log.Warn(fmt.Sprintf("backend %q: instance %d lists other tools, prompts or resources than the first one; the catalog keeps the first one's", ib.name, ib.opts.Instance))
		}
		settle = true
		p.dispatch()
	case Failed:
		if !in.stopping {
			in.stopping = true
			in.cancel(nil)
			if !in.served && p.first == nil {
				p.failed = st.LastError
				for _, w := range p.waiters {
					w.ch <- nil
				}
				p.waiters = nil
			}
		}
		settle = true
	case Starting:
		if st.Retrying {
			settle = true // readiness waits for the first attempt only
		}
	}
	p.mu.Unlock()
	if st.State == Failed {
		p.scheduleRefill()
	}
	p.publish()
	if settle {
		p.b.settle()
	}
}

// sameLists reports whether two instances' catalogs agree.
func sameLists(a, b *Lists) bool {
	eq := func(x, y []json.RawMessage) bool {
		return slices.EqualFunc(x, y, func(m, n json.RawMessage) bool { return string(m) == string(n) })
	}
	return eq(a.Tools, b.Tools) && eq(a.Prompts, b.Prompts) && eq(a.Resources, b.Resources) && eq(a.Templates, b.Templates)
}

// scheduleRefill refills the idle instances after pool_replenish_delay.
func (p *pool) scheduleRefill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refill != nil || !p.running {
		return
	}
	p.refill = time.AfterFunc(p.b.cfg.PoolReplenishDelay, func() {
		p.mu.Lock()
		p.refill = nil
		p.grow(true)
		p.mu.Unlock()
		p.b.changed()
	})
}

// publish sets the entry's state from its instances'.
func (p *pool) publish() {
	p.mu.Lock()
	running, failed, server := p.running, p.failed, p.server
	restarts, lastErr, cause := p.restarts, "", ""
	for ib := range p.insts {
		st := ib.Status()
		restarts += st.Restarts
		if st.LastError != "" {
			lastErr, cause = ib.InstanceName()+": "+st.LastError, ib.InstanceName()+": "+st.Cause
		}
	}
	p.mu.Unlock()
	state := Starting
	switch {
	case !running:
		state = Stopped
	case failed != "":
		state, lastErr, cause = Failed, "an instance could not start: "+failed, "an instance could not start"
	case server != nil:
		state = Healthy
	}
	p.b.setState(state, func(st *Status) {
		st.Restarts, st.LastError, st.Cause = restarts, lastErr, cause
		if state == Healthy {
			st.Server = server
		}
	})
}

// run supervises the pool until ctx ends, obeying the operator's commands
// for the pool as a whole.
func (p *pool) run(ctx context.Context) {
	b := p.b
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	if b.cfg.Enabled {
		p.start()
	} else {
		b.setState(Stopped, nil)
		b.settle()
	}
	for {
		select {
		case <-ctx.Done():
			p.stopAll()
			b.settle()
			return
		case cmd := <-b.cmds:
			switch cmd.op {
			case opStop:
				p.stopAll()
			case opStart, opDemand:
				p.start()
			case opRestart:
				p.stopAll()
				p.start()
			}
			cmd.done <- nil
		}
	}
}

// start starts the pool: pool_min_idle instances (at least one, whose
// handshake gives the catalog).
func (p *pool) start() {
	p.mu.Lock()
	if !p.running || p.failed != "" {
		p.running, p.failed = true, ""
		p.grow(true)
	}
	p.mu.Unlock()
	p.publish()
}

// stopAll stops every instance, the graceful way, and waits for them;
// sessions waiting for an instance get ErrStopped.
func (p *pool) stopAll() {
	p.mu.Lock()
	p.running = false
	if p.refill != nil {
		p.refill.Stop()
		p.refill = nil
	}
	for _, w := range p.waiters {
		w.ch <- nil
	}
	p.waiters = nil
	var gone chan struct{}
	if len(p.insts) > 0 {
		gone = make(chan struct{})
		p.allGone = gone
	}
	for _, in := range p.insts {
		in.stopping = true
		in.cancel(nil)
	}
	p.mu.Unlock()
	if gone != nil {
		<-gone
	}
	p.publish()
}

// stopReason says why ctx ended a child: its session ended (an instance),
// else the gateway is shutting down.
func stopReason(ctx context.Context) string {
	if cause := context.Cause(ctx); errors.Is(cause, errSessionEnded) {
		return cause.Error()
	}
	return "the gateway is shutting down"
}
