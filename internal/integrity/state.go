package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StateFile is the name of the state file in the state directory.
const StateFile = "integrity.json"

// stateVersion is the format of the state file this code writes: 2
// pins each item whole. It reads format 1 too, which pinned the members a
// model reads (pinnedFields), and upgrades each of its approvals when the
// item is seen again unchanged (see filter.list).
const stateVersion = 2

// state is the state file: per backend, the approved fingerprint and
// item of each item, and the fingerprints an operator rejected.
type state struct {
	Version  int                      `json:"version"`
	Backends map[string]*backendState `json:"backends"`
}

type backendState struct {
	Approved map[string]*record `json:"approved"` // by item key, "tool:NAME"
	Rejected map[string]string  `json:"rejected,omitempty"`
}

// record is an approved item: its fingerprint, and what it covers, kept
// so that a change can be shown as a diff.
type record struct {
	SHA256 string `json:"sha256"`
	// Item is the whole item as approved, canonical (format 2).
	Item json.RawMessage `json:"item,omitempty"`
	// Fields are the members format 1 pinned; nil in format 2.
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
}

// approvedRecord is the record of approving it.
func approvedRecord(it *item) *record { return &record{SHA256: it.sum, Item: it.canon} }

// legacy reports whether r is an approval of format 1.
func (r *record) legacy() bool { return r.Item == nil }

// members returns what r covers, member by member, for a diff.
func (r *record) members() map[string]json.RawMessage {
	if r.legacy() {
		return r.Fields
	}
	var m map[string]json.RawMessage
	json.Unmarshal(r.Item, &m)
	return m
}

// check reports whether r's fingerprint is the one of what it holds,
// and brings a format 2 item back to its canonical form (the file is
// written indented).
func (r *record) check() bool {
	if r == nil || len(r.SHA256) != 64 {
		return false
	}
	if r.legacy() {
		return fingerprint(r.Fields) == r.SHA256
	}
	canon, _, err := canonicalize(r.Item)
	sum := sha256.Sum256(canon)
	r.Item = canon
	return err == nil && hex.EncodeToString(sum[:]) == r.SHA256
}

func newState() *state { return &state{Version: stateVersion, Backends: map[string]*backendState{}} }

// loadState reads the state file at path. A missing file is (nil, nil): no
// baseline yet. Anything else that cannot be read is an error, and the
// caller must not trust any baseline.
func loadState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	if st.Version != 1 && st.Version != stateVersion {
		return nil, fmt.Errorf("%s has format version %d; this mcpgated reads versions 1 and %d", path, st.Version, stateVersion)
	}
	if st.Backends == nil {
		return nil, fmt.Errorf("%s has no \"backends\" member", path)
	}
	for name, b := range st.Backends {
		if b == nil || b.Approved == nil {
			return nil, fmt.Errorf("%s: backend %q has no \"approved\" member", path, name)
		}
		for key, r := range b.Approved {
			// A file of format 2 may still hold approvals of format 1: of
			// items not seen since the upgrade.
			if !r.check() || (st.Version == 1 && !r.legacy()) {
				return nil, fmt.Errorf("%s: backend %q, %s: the fingerprint does not match what it approved", path, name, key)
			}
		}
	}
	return st, nil
}

// save writes st to path atomically, mode 0600: a temporary file in the
// same directory, synced, then renamed over the old one.
func (st *state) save(path string) error {
	st.Version = stateVersion // format 1's approvals are kept as they are

	// Without HTML escaping: the fields must read back as the bytes
	// their fingerprints were taken of.
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(st); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+StateFile+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
