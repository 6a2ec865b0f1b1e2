// Package integrity pins what each backend offers: it keeps a fingerprint
// of every tool, prompt and resource template an operator approved, and
// holds back from the catalog what changed or is new until an operator
// approves it.
package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/suggest"
)

// Store is the approved baseline of every backend and what differs from
// it. It sits between what backends offer and what the catalog exposes:
// the gateway passes each backend's lists through Filter. Its methods may
// be called from many goroutines.
type Store struct {
	path string
	log  *slog.Logger

	mu       sync.Mutex
	defaults config.Integrity
	settings map[string]config.Integrity // by backend
	loaded   bool
	st       *state // the approved baseline; nil until loaded, and while corrupt
	corrupt  error  // why the state file could not be read; nil if it could
	gen      uint64 // counts approvals, rejections, resets and reconfigurations
	backends map[string]*view
}

// view is what Filter last made of one backend's lists.
type view struct {
	lists     *backend.Lists // the backend's lists it was made of
	gen       uint64
	settings  config.Integrity
	served    *backend.Lists
	held      []string // names of the tools held back
	pending   []*Change
	journaled map[string]bool // changes already journaled, by key, fingerprint and reason
}

// Change is an item that a backend offers and that is not approved: new,
// changed since it was approved, or breaking a limit.
type Change struct {
	Backend string
	Kind    Kind
	Name    string // its name at the backend; a template's uriTemplate
	Reason  string // why it is not served, or why it is reported
	// Served is set under integrity = "warn": the change is served and
	// only reported.
	Served bool
	// Approvable is false for an item that breaks a limit, has hidden
	// characters or a repeated or case-variant member: no approval serves
	// it.
	Approvable bool
	// Fingerprint is the hex SHA-256 of the item as offered now, in
	// canonical form: what an approval or a rejection names (ID).
	Fingerprint string

	old *record // the approved version; nil for a new item
	now *item
}

// Key is "KIND:NAME", the change's item within its backend.
func (c *Change) Key() string { return string(c.Kind) + ":" + c.Name }

// ID is "KIND:NAME@FINGERPRINT": this version of the item, as an
// approval or a rejection names what was reviewed.
func (c *Change) ID() string { return c.Key() + "@" + c.Fingerprint }

// New returns a store keeping its state file in dir. Nothing is read until
// a backend with a policy other than "off" is filtered.
func New(dir string, logger *slog.Logger) *Store {
	if logger == nil {
		logger = slog.Default()
	}
	return &Store{
		path:     filepath.Join(dir, StateFile),
		log:      logger,
		defaults: config.Default().Gateway.Integrity,
		settings: map[string]config.Integrity{},
		backends: map[string]*view{},
	}
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// Configure takes the integrity settings of every backend from cfg. Items
// are filtered anew with them at the next Filter.
func (s *Store) Configure(cfg *config.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults = cfg.Gateway.Integrity
	s.settings = map[string]config.Integrity{}
	for name, b := range cfg.Backends {
		s.settings[name] = b.Integrity
	}
	for name := range s.backends {
		if _, ok := cfg.Backends[name]; !ok {
			delete(s.backends, name)
		}
	}
	s.gen++
}

// Filter returns the part of lists that backend name may show clients, and
// the names of the tools it holds back. Resources are never held back.
// The result is cached until lists, the settings or the approvals change.
func (s *Store) Filter(name string, lists *backend.Lists) (served *backend.Lists, heldTools []string) {
	if lists == nil {
		return nil, nil
	}
	var logs []func()
	defer func() {
		for _, l := range logs {
			l()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	set, ok := s.settings[name]
	if !ok {
		set = s.defaults
	}
	v := s.backends[name]
	if v != nil && v.lists == lists && v.gen == s.gen && v.settings == set {
		return v.served, v.held
	}
	if v == nil {
		v = &view{journaled: map[string]bool{}}
		s.backends[name] = v
	}
	if set.Policy != config.IntegrityOff {
		logs = append(logs, s.load()...)
	}
	f := filter{s: s, name: name, set: set, v: v, served: &backend.Lists{Resources: lists.Resources}}
	if s.st != nil && set.Policy != config.IntegrityOff {
		f.approved = s.st.Backends[name]
		if f.approved == nil {
			f.baseline = &backendState{Approved: map[string]*record{}}
		}
	}
	v.pending, v.held = nil, nil
	f.served.Tools = f.list(Tool, lists.Tools)
	f.served.Prompts = f.list(Prompt, lists.Prompts)
	f.served.Templates = f.list(Template, lists.Templates)
	if f.upgraded > 0 {
		err := s.st.save(s.path)
		n := f.upgraded
		logs = append(logs, func() {
			if err != nil {
				s.log.Error(fmt.Sprintf("cannot write the integrity state file %s: %v", s.path, err), "backend", name)
			}
			s.log.Info(fmt.Sprintf("backend %q: %d approved items, unchanged since they were approved, are now pinned whole (integrity state format %d)", name, n, stateVersion),
				"backend", name, "items", n, "state_file", s.path, journal.MessageIntegrityBaseline.Attr())
		})
	}
	if f.baseline != nil {
		s.st.Backends[name] = f.baseline
		err := s.st.save(s.path)
		n := len(f.baseline.Approved)
		logs = append(logs, func() {
			if err != nil {
				s.log.Error(fmt.Sprintf("cannot write the integrity state file %s: %v; the baseline of backend %q holds until mcpgated stops", s.path, err, name), "backend", name)
			}
			what := "held back until an operator approves it"
			if set.Policy == config.IntegrityWarn {
				what = "journaled (integrity = \"warn\")"
			}
			s.log.Info(fmt.Sprintf("recorded the integrity baseline of backend %q: %d items; a change to any of them, and any new item, is %s", name, n, what),
				"backend", name, "items", n, "state_file", s.path, journal.MessageIntegrityBaseline.Attr())
		})
	}
	logs = append(logs, f.logs...)
	v.lists, v.gen, v.settings, v.served = lists, s.gen, set, f.served
	return v.served, v.held
}

// load reads the state file the first time it is needed; s.mu is held. It
// returns what to log once the lock is released.
func (s *Store) load() []func() {
	if s.loaded {
		return nil
	}
	s.loaded = true
	st, err := loadState(s.path)
	switch {
	case err != nil:
		s.corrupt = err
		return []func(){func() {
			s.log.Error(fmt.Sprintf("the integrity state file cannot be read: %v; every item of a backend with integrity = \"pin\" is held back. Review them (mcpgatectl integrity list, diff), then `mcpgatectl integrity reset` records a new baseline from what the backends offer now", err),
				"state_file", s.path, journal.MessageIntegrityCorrupt.Attr())
		}}
	case st == nil:
		s.st = newState()
		return []func(){func() {
			s.log.Info("no integrity state file yet: recording the baseline of each backend as it starts", "state_file", s.path)
		}}
	}
	s.st = st
	return nil
}

// filter is one run of Filter over one backend's lists.
type filter struct {
	s        *Store
	name     string
	set      config.Integrity
	v        *view
	approved *backendState // nil while recording a baseline or without one
	baseline *backendState // being recorded; nil otherwise
	served   *backend.Lists
	upgraded int // approvals of format 1 pinned whole
	logs     []func()
}

func (f *filter) list(kind Kind, items []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	for _, raw := range items {
		it := parseItem(kind, raw)
		if it == nil {
			if name := catalogName(kind, raw); name != "" && f.set.Policy != config.IntegrityOff {
				// The catalog would list what cannot be pinned.
				sum := sha256.Sum256(raw)
				f.change(&item{kind: kind, name: name, sum: hex.EncodeToString(sum[:]), raw: raw}, nil, "it cannot be read as one JSON object", false)
				continue
			}
			out = append(out, raw) // no name: the catalog reports it
			continue
		}
		var rec *record
		if f.approved != nil {
			rec = f.approved.Approved[it.key()]
		}
		if why := violation(it, f.set); why != "" {
			f.change(it, rec, why, false)
			continue
		}
		switch {
		case f.set.Policy == config.IntegrityOff:
		case f.s.corrupt != nil:
			if !f.change(it, nil, "no trusted baseline: the integrity state file cannot be read", true) {
				continue
			}
		case f.baseline != nil:
			f.baseline.Approved[it.key()] = approvedRecord(it)
		case rec != nil && rec.SHA256 == it.sum:
		case rec != nil && rec.legacy() && rec.SHA256 == legacyFingerprint(kind, raw):
			// Approved by format 1, which pinned the members a model
			// reads, and those are unchanged. It was served so; from
			// now on all of it is pinned. (An item whose reading is
			// ambiguous is held above, whatever was approved.)
			f.approved.Approved[it.key()] = approvedRecord(it)
			f.upgraded++
		case f.rejected(it, raw):
			f.hold(it) // an operator said no to exactly this
			continue
		case rec != nil:
			if !f.change(it, rec, "changed since it was approved", true) {
				continue
			}
		default:
			if !f.change(it, nil, "new: not in the approved baseline"+f.lookalike(it), true) {
				continue
			}
		}
		out = append(out, raw)
	}
	return out
}

// catalogName is the name the catalog reads in raw, as it reads it; ""
// when it would ignore the item.
func catalogName(kind Kind, raw json.RawMessage) string {
	v, _, _ := jsonrpc.Lookup(raw, nameField[kind])
	name, _ := jsonrpc.StringValue(v)
	return name
}

// rejected reports whether an operator rejected exactly this version of
// it, by its fingerprint or, in format 1, by the members format 1 pinned.
func (f *filter) rejected(it *item, raw json.RawMessage) bool {
	if f.approved == nil {
		return false
	}
	sum, ok := f.approved.Rejected[it.key()]
	return ok && (sum == it.sum || sum == legacyFingerprint(it.kind, raw))
}

// change records a change and journals it once; it reports whether the
// item is served nevertheless (integrity = "warn" and approvable).
func (f *filter) change(it *item, old *record, reason string, approvable bool) bool {
	served := approvable && f.set.Policy == config.IntegrityWarn
	c := &Change{Backend: f.name, Kind: it.kind, Name: it.name, Reason: reason, Served: served, Approvable: approvable,
		Fingerprint: it.sum, old: old, now: it}
	f.v.pending = append(f.v.pending, c)
	if !served {
		f.hold(it)
	}
	if id := it.key() + "\x00" + it.sum + "\x00" + reason; !f.v.journaled[id] {
		f.v.journaled[id] = true
		f.logs = append(f.logs, func() { f.s.journal(c) })
	}
	return served
}

func (f *filter) hold(it *item) {
	if it.kind == Tool {
		f.v.held = append(f.v.held, it.name)
	}
}

// lookalike names another backend's tool whose name the new tool's is
// close to, the shape of a tool meant to shadow it.
func (f *filter) lookalike(it *item) string {
	if it.kind != Tool {
		return ""
	}
	for other, v := range f.s.backends {
		if other == f.name || v.served == nil {
			continue
		}
		for _, raw := range v.served.Tools {
			o := parseItem(Tool, raw)
			if o != nil && suggest.Distance(o.name, it.name) <= max(1, len(it.name)/8) {
				return fmt.Sprintf("; its name is close to tool %q of backend %q", o.name, other)
			}
		}
	}
	return ""
}

// journal writes one entry about c.
func (s *Store) journal(c *Change) {
	what := "held back until an operator reviews and approves it (mcpgatectl integrity diff " + c.Backend + " " + c.Key() + ")"
	switch {
	case c.Served:
		what = "served (integrity = \"warn\"); not approved"
	case !c.Approvable:
		what = "held back; no approval serves it"
	}
	s.log.Warn(fmt.Sprintf("backend %q: %s %q %s: %s", c.Backend, c.Kind, c.Name, c.Reason, what),
		"backend", c.Backend, "kind", string(c.Kind), "item", c.Name, "reason", c.Reason, "served", c.Served,
		"fingerprint", c.Fingerprint, "diff", c.Diff(), journal.MessageIntegrityChange.Attr())
}
