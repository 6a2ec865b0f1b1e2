package backend

import (
	"fmt"
	"time"
)

// Listed reports whether the backend's lists belong in the catalog: it is
// running, or restarting after a crash within catalog_grace, so that
// clients do not see its tools vanish and come back.
func (b *Backend) Listed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	inGrace := time.Now().Before(b.graceUntil)
	switch b.st.State {
	case Healthy, Unhealthy:
		return b.conn != nil || inGrace // a crash is being noticed
	case Starting:
		return inGrace
	}
	return false
}

// inGrace reports whether the backend's lists are kept for a restart.
func (b *Backend) inGrace() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Now().Before(b.graceUntil)
}

// keepListed keeps the lists of a child that died, or that an operator
// restarts, for catalog_grace; when the grace ends without a new handshake
// the catalog drops them.
func (b *Backend) keepListed() {
	grace := b.cfg.CatalogGrace
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.graceTimer != nil {
		b.graceTimer.Stop()
		b.graceTimer = nil
	}
	if l := b.lists.Load(); grace <= 0 || len(l.Tools)+len(l.Prompts)+len(l.Resources)+len(l.Templates) == 0 {
		b.graceUntil = time.Time{}
		b.lists.Store(&Lists{})
		return
	}
	if b.graceUntil.IsZero() || time.Now().After(b.graceUntil) {
		// A crash loop does not extend the grace: it counts from the
		// first crash since the backend was last up.
		b.graceUntil = time.Now().Add(grace)
	}
	b.graceTimer = time.AfterFunc(time.Until(b.graceUntil), b.changed)
}

// endGrace drops the lists kept for a restart that will not come: the
// backend was stopped or gave up.
func (b *Backend) endGrace() {
	b.stopGrace()
	b.lists.Store(&Lists{})
}

// stopGrace ends the grace of a restart, without touching the lists.
func (b *Backend) stopGrace() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.graceTimer != nil {
		b.graceTimer.Stop()
		b.graceTimer = nil
	}
	b.graceUntil = time.Time{}
}

// cameBack runs when a handshake succeeded, before its lists replace the
// old ones: the grace is over, and a backend that lost all its tools is
// worth a warning, since clients then see its tools vanish.
func (b *Backend) cameBack(next *Lists) {
	b.stopGrace()
	if len(next.Tools) > 0 {
		b.mon.toolsSeen.Store(true)
	} else if b.mon.toolsSeen.Load() {
		b.log.Warn(fmt.Sprintf("backend %q came back with no tools after having had some; check its configuration and its stderr", b.name))
	}
}
