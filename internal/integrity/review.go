package integrity

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// ErrNoChange is returned, wrapped, when an approval or rejection names
// nothing that is pending.
var ErrNoChange = errors.New("no pending change")

// Pending returns the pending changes of backend name, in the order the
// backend lists them, as of the last Filter.
func (s *Store) Pending(name string) []Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.backends[name]
	if v == nil {
		return nil
	}
	out := make([]Change, len(v.pending))
	for i, c := range v.pending {
		out[i] = *c
	}
	return out
}

// NumPending returns how many changes of backend name are pending.
func (s *Store) NumPending(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.backends[name]; v != nil {
		return len(v.pending)
	}
	return 0
}

// Corrupt returns why the state file could not be read, or nil.
func (s *Store) Corrupt() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.corrupt
}

// Diff returns a unified diff from the approved version of c's item to
// the one offered now; a new item is all added lines.
func (c *Change) Diff() string {
	var old []byte
	oldName := "/dev/null"
	if c.old != nil {
		old = render(c.old.members())
		oldName = string(c.Kind) + " " + c.Name + " (approved)"
	}
	return string(diff.Diff(oldName, old, string(c.Kind)+" "+c.Name+" (offered now)", render(c.now.fields)))
}

// Diff returns, for each pending change of backend name that items names
// (by "KIND:NAME", NAME or ID; all of them when empty), a header saying
// why it is pending and which version it is, and its unified diff; then
// the command that approves exactly what it showed.
func (s *Store) Diff(name string, items []string) (string, error) {
	changes, err := s.Review(name, items)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var ids []string
	for _, c := range changes {
		fmt.Fprintf(&b, "# backend %s, %s %s: %s; %s\n# %s\n%s", name, c.Kind, visible(c.Name), c.Reason, c.state(), visible(c.ID()), c.Diff())
		if c.Approvable {
			ids = append(ids, visible(c.ID()))
		}
	}
	if len(ids) > 0 {
		fmt.Fprintf(&b, "# To approve exactly these versions: mcpgatectl integrity approve %s %s\n", name, strings.Join(ids, " "))
	}
	return b.String(), nil
}

// state says what is done with c's item now.
func (c *Change) state() string {
	switch {
	case c.Served:
		return "served (integrity = \"warn\"), not approved"
	case !c.Approvable:
		return "held back, cannot be approved"
	}
	return "held back"
}

// Review returns the pending changes of backend name that items names by
// "KIND:NAME", NAME or ID (all of them when items is empty), in the order
// the backend lists them, as of the last Filter. Each has its Diff and
// its ID, which is what an approval names.
func (s *Store) Review(name string, items []string) ([]Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changes, err := s.selectLocked(name, items, false)
	if err != nil {
		return nil, err
	}
	out := make([]Change, len(changes))
	for i, c := range changes {
		out[i] = *c
	}
	return out, nil
}

// selectLocked returns the pending changes of backend name that items
// names, all of them when items is empty. An item is "KIND:NAME" or NAME,
// or with exact set "KIND:NAME@FINGERPRINT", which must be the version
// pending now: a change made after the review is not what was reviewed.
// s.mu is held.
func (s *Store) selectLocked(name string, items []string, exact bool) ([]*Change, error) {
	v := s.backends[name]
	if exact && len(items) == 0 {
		return nil, fmt.Errorf("backend %q: name the versions you reviewed, as KIND:NAME@FINGERPRINT: `mcpgatectl integrity diff %s` shows them, and the command that approves exactly them", name, name)
	}
	if v == nil || len(v.pending) == 0 {
		return nil, fmt.Errorf("backend %q: %w", name, ErrNoChange)
	}
	if len(items) == 0 {
		return v.pending, nil
	}
	var out []*Change
	var stale []string
	for _, want := range items {
		key, sum, hasSum := cutID(want)
		if exact && !hasSum {
			return nil, fmt.Errorf("backend %q: %q names no version: name the one you reviewed, as %s@FINGERPRINT from `mcpgatectl integrity diff %s %s`", name, want, want, name, want)
		}
		found := false
		for _, c := range v.pending {
			if c.Key() != key && c.Name != key {
				continue
			}
			found = true
			if hasSum && c.Fingerprint != sum {
				stale = append(stale, fmt.Sprintf("%s changed after it was reviewed (reviewed %s, offered now %s)", visible(c.Key()), short(sum), short(c.Fingerprint)))
				continue
			}
			out = append(out, c)
		}
		if !found {
			return nil, fmt.Errorf("backend %q: %w to %q; `mcpgatectl integrity list` shows what is pending", name, ErrNoChange, want)
		}
	}
	if len(stale) > 0 {
		return nil, &StaleError{Backend: name, Changes: stale}
	}
	return out, nil
}

// cutID splits "KIND:NAME@FINGERPRINT" into key and fingerprint, and
// reports whether it had one: 64 hex digits after the last "@" (a
// template's uriTemplate may hold "@" too).
func cutID(id string) (key, sum string, ok bool) {
	i := strings.LastIndexByte(id, '@')
	if i < 0 || len(id)-i-1 != 64 || strings.Trim(id[i+1:], "0123456789abcdef") != "" {
		return id, "", false
	}
	return id[:i], id[i+1:], true
}

// StaleError is the refusal of a decision on a version that is no longer
// the one pending: nothing was decided, and what changed stays pending.
type StaleError struct {
	Backend string
	Changes []string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("backend %q: nothing decided: %s; it stays pending: review it again with `mcpgatectl integrity diff %s`",
		e.Backend, strings.Join(e.Changes, "; "), e.Backend)
}

// short is a fingerprint cut to what a person compares.
func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return sum
}

// Approve approves the pending changes of backend name that items names,
// each by its ID ("KIND:NAME@FINGERPRINT", as Diff and Review show it):
// exactly the versions the operator reviewed. If any of them changed
// since, nothing is approved (a *StaleError says what changed) and the
// change stays pending. It returns the keys it approved. The caller
// refreshes the catalog, which then serves them.
func (s *Store) Approve(name string, items []string) ([]string, error) {
	return s.decide(name, items, true)
}

// Reject marks the pending changes of backend name that items names, by
// ID as Approve, as refused: they stay held back and are no longer
// pending, until the backend offers something else under that name.
func (s *Store) Reject(name string, items []string) ([]string, error) {
	return s.decide(name, items, false)
}

func (s *Store) decide(name string, items []string, approve bool) ([]string, error) {
	s.mu.Lock()
	if s.corrupt != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("the integrity state file cannot be read (%v): review what is pending, then `mcpgatectl integrity reset` records a new baseline", s.corrupt)
	}
	changes, err := s.selectLocked(name, items, true)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if approve {
		for _, c := range changes {
			if !c.Approvable {
				s.mu.Unlock()
				return nil, fmt.Errorf("backend %q: %s %q cannot be approved: %s; if the size is expected, raise the limit in the configuration", name, c.Kind, visible(c.Name), c.Reason)
			}
		}
	}
	bs := s.st.Backends[name]
	if bs == nil {
		bs = &backendState{Approved: map[string]*record{}}
		s.st.Backends[name] = bs
	}
	var keys []string
	for _, c := range changes {
		if approve {
			bs.Approved[c.Key()] = approvedRecord(c.now)
			delete(bs.Rejected, c.Key())
		} else {
			if bs.Rejected == nil {
				bs.Rejected = map[string]string{}
			}
			bs.Rejected[c.Key()] = c.now.sum
		}
		keys = append(keys, c.Key())
	}
	s.gen++
	err = s.st.save(s.path)
	s.mu.Unlock()
	verb := "rejected"
	if approve {
		verb = "approved"
	}
	for _, c := range changes {
		s.log.Info(fmt.Sprintf("backend %q: %s %s", name, visible(c.Key()), verb), "backend", name, "item", c.Key(),
			"fingerprint", c.Fingerprint, "decision", verb, journal.MessageIntegrityDecision.Attr())
	}
	if err != nil {
		return keys, fmt.Errorf("%s, but cannot write the state file: %w; the decision holds until mcpgated stops", verb, err)
	}
	return keys, nil
}

// Reset treats an unreadable state file as no baseline: it moves it aside
// to PATH.corrupt and records a new baseline of every backend from what it
// offers at the next Filter. It refuses while the state file is readable:
// Approve is the way to accept changes then.
func (s *Store) Reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt == nil {
		return errors.New("the integrity state file is readable: there is nothing to reset; approve changes with `mcpgatectl integrity approve`")
	}
	if err := os.Rename(s.path, s.path+".corrupt"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("move the state file aside: %w", err)
	}
	s.log.Warn(fmt.Sprintf("the unreadable integrity state file was moved to %s on an operator's request; recording a new baseline of every backend", s.path+".corrupt"),
		"state_file", s.path, journal.MessageIntegrityDecision.Attr())
	s.corrupt, s.st = nil, newState()
	s.gen++
	return nil
}
