package integrity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StateFile is the name of the state file in the state directory.
const StateFile = "integrity.json"

// stateVersion is the format of the state file this code writes and reads.
const stateVersion = 1

// state is the state file: per backend, the approved fingerprint and
// fields of each item, and the fingerprints an operator rejected.
type state struct {
	Version  int                      `json:"version"`
	Backends map[string]*backendState `json:"backends"`
}

type backendState struct {
	Approved map[string]*record `json:"approved"` // by item key, "tool:NAME"
	Rejected map[string]string  `json:"rejected,omitempty"`
}

// record is an approved item: its fingerprint, and the fields it covers,
// kept so that a change can be shown as a diff.
type record struct {
	SHA256 string                     `json:"sha256"`
	Fields map[string]json.RawMessage `json:"fields"`
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
	if st.Version != stateVersion {
		return nil, fmt.Errorf("%s has format version %d; this mcpgated reads version %d", path, st.Version, stateVersion)
	}
	if st.Backends == nil {
		return nil, fmt.Errorf("%s has no \"backends\" member", path)
	}
	for name, b := range st.Backends {
		if b == nil || b.Approved == nil {
			return nil, fmt.Errorf("%s: backend %q has no \"approved\" member", path, name)
		}
		for key, r := range b.Approved {
			if r == nil || len(r.SHA256) != 64 || fingerprint(r.Fields) != r.SHA256 {
				return nil, fmt.Errorf("%s: backend %q, %s: the fingerprint does not match the fields", path, name, key)
			}
		}
	}
	return st, nil
}

// save writes st to path atomically, mode 0600: a temporary file in the
// same directory, synced, then renamed over the old one.
func (st *state) save(path string) error {
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
