package dbusapi

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// A bus without ProcessFD (Debian bookworm's dbus-daemon 1.14) names a
// caller by the PID its process had when it connected. A backend can
// connect, hand the connection to a child and exit; once its PID goes to
// a process that does not descend from the gateway, a pidfd opened on
// that PID pins the wrong process, which a walk up from it takes for the
// gateway's own user or root. connections closes that gap: it notes when
// each connection appeared on the bus, and a process that started after
// its connection appeared cannot be the one that made it.

// maxWatchedConnections bounds the connections whose arrival is kept; one
// the table has no room for is not trusted by its PID (see pinnedSince).
const maxWatchedConnections = 1 << 16

// connections notes when each connection newer than the gateway's own
// appeared on the bus, by unique name, as the bus's NameOwnerChanged
// tells it. Its methods may be called from many goroutines.
type connections struct {
	own uint64 // the counter of the gateway's own unique name: older connections were not watched

	mu    sync.Mutex
	cond  *sync.Cond
	since map[string]time.Duration // CLOCK_BOOTTIME when the name appeared
	last  uint64                   // the highest counter seen appear
}

// watchConnections starts noting the connections of bus; it stops when
// bus closes. It returns nil when the gateway's own unique name cannot be
// read (a bus that names connections otherwise): nothing is watched, and
// callers are told apart as before.
func watchConnections(bus *dbus.Conn) *connections {
	names := bus.Names()
	if len(names) == 0 {
		return nil
	}
	own, ok := nameCounter(names[0])
	if !ok {
		return nil
	}
	w := &connections{own: own, since: map[string]time.Duration{}, last: own}
	w.cond = sync.NewCond(&w.mu)
	signals := make(chan *dbus.Signal, 64)
	bus.Signal(signals)
	if err := bus.AddMatchSignal(dbus.WithMatchSender("org.freedesktop.DBus"), dbus.WithMatchInterface("org.freedesktop.DBus"),
		dbus.WithMatchMember("NameOwnerChanged")); err != nil {
		bus.RemoveSignal(signals)
		return nil
	}
	go w.run(signals)
	return w
}

func (w *connections) run(signals <-chan *dbus.Signal) {
	for sig := range signals { // closed when the connection closes
		if sig.Name != "org.freedesktop.DBus.NameOwnerChanged" || sig.Sender != "org.freedesktop.DBus" || len(sig.Body) != 3 {
			continue
		}
		name, _ := sig.Body[0].(string)
		oldOwner, _ := sig.Body[1].(string)
		newOwner, _ := sig.Body[2].(string)
		n, unique := nameCounter(name)
		if !unique {
			continue
		}
		w.mu.Lock()
		switch {
		case oldOwner == "" && newOwner == name:
			if len(w.since) < maxWatchedConnections {
				w.since[name] = boottime()
			}
			w.last = max(w.last, n)
			w.cond.Broadcast()
		case newOwner == "":
			delete(w.since, name)
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.last = ^uint64(0) // nothing more will come: no one waits
	w.cond.Broadcast()
	w.mu.Unlock()
}

// appeared returns when the connection sender appeared: ok is false for
// one that cannot be told (newer than the gateway's, but not noted: the
// table was full, or the signal did not come in time). old is true for a
// connection older than the gateway's own, which was never watched.
func (w *connections) appeared(ctx context.Context, sender string) (at time.Duration, old, ok bool) {
	n, unique := nameCounter(sender)
	if !unique {
		return 0, false, false
	}
	if n <= w.own {
		return 0, true, false
	}
	// The bus sent NameOwnerChanged before it forwarded the caller's first
	// call, but the call may be handled before the signal is: wait for
	// the signal of this name, or of a later one.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.last < n && ctx.Err() == nil {
		w.cond.Wait()
	}
	at, ok = w.since[sender]
	return at, false, ok
}

// nameCounter returns the counter of a unique bus name, ":1.42" → 42;
// ok is false for a well-known name.
func nameCounter(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, ":")
	if !ok {
		return 0, false
	}
	_, n, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(n, 10, 64)
	return v, err == nil
}

// boottime is now on CLOCK_BOOTTIME, the clock of /proc/PID/stat's
// starttime.
func boottime() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return time.Duration(ts.Nano())
}

// clockTicks is the unit of /proc/PID/stat's starttime (sysconf
// _SC_CLK_TCK): 100 Hz on every Linux architecture Go supports.
const clockTicks = 100

// processStart returns when process pid started, on CLOCK_BOOTTIME, and
// its effective uid, which the bus took as the connection's.
func processStart(pid int) (start time.Duration, euid uint32, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, 0, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64) // field 22 of the line
	if err != nil {
		return 0, 0, false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	for line := range strings.Lines(string(status)) {
		if rest, found := strings.CutPrefix(line, "Uid:"); found {
			ids := strings.Fields(rest)
			if len(ids) < 2 {
				return 0, 0, false
			}
			u, err := strconv.ParseUint(ids[1], 10, 32)
			return time.Duration(ticks) * time.Second / clockTicks, uint32(u), err == nil
		}
	}
	return 0, 0, false
}
