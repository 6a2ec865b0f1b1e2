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
		old = render(c.old.Fields)
		oldName = string(c.Kind) + " " + c.Name + " (approved)"
	}
	return string(diff.Diff(oldName, old, string(c.Kind)+" "+c.Name+" (offered now)", render(c.now.fields)))
}

// Diff returns, for each pending change of backend name that items names
// (all of them when items is empty), a header saying why it is pending
// and its unified diff.
func (s *Store) Diff(name string, items []string) (string, error) {
	changes, err := s.select_(name, items)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range changes {
		state := "held back"
		switch {
		case c.Served:
			state = "served (integrity = \"warn\"), not approved"
		case !c.Approvable:
			state = "held back, cannot be approved"
		}
		fmt.Fprintf(&b, "# backend %s, %s %s: %s; %s\n%s", name, c.Kind, visible(c.Name), c.Reason, state, c.Diff())
	}
	return b.String(), nil
}

// select_ returns the pending changes of backend name that items names by
// "KIND:NAME" or NAME, all of them when items is empty.
func (s *Store) select_(name string, items []string) ([]*Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.selectLocked(name, items)
}

func (s *Store) selectLocked(name string, items []string) ([]*Change, error) {
	v := s.backends[name]
	if v == nil || len(v.pending) == 0 {
		return nil, fmt.Errorf("backend %q: %w", name, ErrNoChange)
	}
	if len(items) == 0 {
		return v.pending, nil
	}
	var out []*Change
	for _, want := range items {
		found := false
		for _, c := range v.pending {
			if c.Key() == want || c.Name == want {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("backend %q: %w to %q; `mcpgatectl integrity list` shows what is pending", name, ErrNoChange, want)
		}
	}
	return out, nil
}

// Approve approves the pending changes of backend name that items names
// (all that can be approved when empty): exactly the versions Pending and
// Diff show, so a change made after the review stays pending. It returns the keys it
// approved. The caller refreshes the catalog, which then serves them.
func (s *Store) Approve(name string, items []string) ([]string, error) {
	return s.decide(name, items, true)
}

// Reject marks the pending changes of backend name that items names (all
// when empty) as refused: they stay held back and are no longer pending,
// until the backend offers something else under that name.
func (s *Store) Reject(name string, items []string) ([]string, error) {
	return s.decide(name, items, false)
}

func (s *Store) decide(name string, items []string, approve bool) ([]string, error) {
	s.mu.Lock()
	if s.corrupt != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("the integrity state file cannot be read (%v): review what is pending, then `mcpgatectl integrity reset` records a new baseline", s.corrupt)
	}
	changes, err := s.selectLocked(name, items)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if approve {
		// Approving everything passes over what no approval serves;
		// naming such an item is an error.
		var ok []*Change
		for _, c := range changes {
			switch {
			case c.Approvable:
				ok = append(ok, c)
			case len(items) > 0:
				s.mu.Unlock()
				return nil, fmt.Errorf("backend %q: %s %q cannot be approved: %s; if the size is expected, raise the limit in the configuration", name, c.Kind, visible(c.Name), c.Reason)
			}
		}
		if len(ok) == 0 {
			s.mu.Unlock()
			return nil, fmt.Errorf("backend %q: nothing pending can be approved: %s", name, changes[0].Reason)
		}
		changes = ok
	}
	bs := s.st.Backends[name]
	if bs == nil {
		bs = &backendState{Approved: map[string]*record{}}
		s.st.Backends[name] = bs
	}
	var keys []string
	for _, c := range changes {
		if approve {
			bs.Approved[c.Key()] = &record{SHA256: c.now.sum, Fields: c.now.fields}
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
	for _, k := range keys {
		s.log.Info(fmt.Sprintf("backend %q: %s %s", name, visible(k), verb), "backend", name, "item", k, "decision", verb, journal.MessageIntegrityDecision.Attr())
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
