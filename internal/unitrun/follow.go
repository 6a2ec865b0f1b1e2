package unitrun

import (
	"errors"
	"fmt"
	"sync"

	"github.com/godbus/dbus/v5"
)

// follower is what is known of a unit from its PropertiesChanged signals:
// systemd sends the values of its Service properties (Result,
// ExecMainStatus, …) before those of the Unit (ActiveState, InvocationID)
// for each change, and may unload an inactive unit at once, after which
// its properties read as a fresh unit's.
type follower struct {
	changed chan struct{} // a wake-up per change; closed when the runner closes
	mu      sync.Mutex
	props   map[string]dbus.Variant
}

// last returns the value of name the signals last carried.
func (f *follower) last(name string) (dbus.Variant, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.props[name]
	return v, ok
}

// dispatch records what changed on each followed unit and wakes its
// follower.
func (r *Runner) dispatch() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			r.mu.Lock()
			for path, f := range r.watched {
				close(f.changed)
				delete(r.watched, path)
			}
			r.mu.Unlock()
			return
		case sig := <-r.signals:
			if sig.Name != propertiesIface+".PropertiesChanged" || len(sig.Body) < 2 {
				continue
			}
			changed, _ := sig.Body[1].(map[string]dbus.Variant)
			r.mu.Lock()
			if f, ok := r.watched[sig.Path]; ok {
				f.mu.Lock()
				for k, v := range changed {
					f.props[k] = v
				}
				f.mu.Unlock()
				select {
				case f.changed <- struct{}{}:
				default: // a wake-up is pending already
				}
			}
			r.mu.Unlock()
		}
	}
}

// watch follows the unit at path until the returned function is called.
func (r *Runner) watch(path dbus.ObjectPath) (*follower, func(), error) {
	match := []dbus.MatchOption{
		dbus.WithMatchObjectPath(path),
		dbus.WithMatchInterface(propertiesIface),
		dbus.WithMatchMember("PropertiesChanged"),
	}
	if err := r.bus.AddMatchSignal(match...); err != nil {
		return nil, nil, fmt.Errorf("follow %s: %w", path, err)
	}
	f := &follower{changed: make(chan struct{}, 1), props: map[string]dbus.Variant{}}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, nil, errors.New("the runner is closed")
	}
	if _, dup := r.watched[path]; dup {
		r.mu.Unlock()
		_ = r.bus.RemoveMatchSignal(match...)
		return nil, nil, fmt.Errorf("unit %s is in use already", path)
	}
	r.watched[path] = f
	r.mu.Unlock()
	return f, func() {
		r.mu.Lock()
		if r.watched[path] == f {
			delete(r.watched, path)
		}
		r.mu.Unlock()
		_ = r.bus.RemoveMatchSignal(match...)
	}, nil
}
