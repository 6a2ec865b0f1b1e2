package access

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// IssuedFile is the name, in the daemon's state directory, of the file that
// keeps the tokens issued over D-Bus (see Issued).
const IssuedFile = "tokens.json"

// IssuedToken is one token the gateway issued for a configured client,
// as the store keeps it: its hash, never the token.
type IssuedToken struct {
	// ID names the token without revealing it: the first 12 hex digits of
	// its SHA-256, as `mcpgatectl token list` shows a configured one.
	ID      string `json:"id"`
	SHA256  string `json:"sha256"`  // 64 hex digits
	Created int64  `json:"created"` // µs since the epoch
}

// Issued is the store of tokens issued at run time, over D-Bus, for
// clients the configuration defines: the configuration says what a client
// may use, the store only adds ways to be that client. It lives in a file
// of the state directory, written atomically on every change, so that a
// token and its revocation outlast reloads and restarts; the configuration
// in /etc stays the administrator's. Its methods may be called from many
// goroutines.
type Issued struct {
	path string
	mu   sync.Mutex
	// byClient holds the tokens of each client, oldest first.
	byClient map[string][]IssuedToken
}

// issuedDocument is the file's content.
type issuedDocument struct {
	Comment string                   `json:"comment"`
	Clients map[string][]IssuedToken `json:"clients"`
}

// OpenIssued reads the store in dir. A missing file is an empty store; a
// file that cannot be read or parsed is an error that names it: the
// caller should then trust no issued token rather than guess.
func OpenIssued(dir string) (*Issued, error) {
	s := &Issued{path: filepath.Join(dir, IssuedFile), byClient: map[string][]IssuedToken{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("issued tokens: %w", err)
	}
	var doc issuedDocument
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("issued tokens: %s: %w; move it aside to drop every issued token", s.path, err)
	}
	for name, tokens := range doc.Clients {
		for _, t := range tokens {
			if sum, err := hex.DecodeString(t.SHA256); err != nil || len(sum) != sha256.Size {
				return nil, fmt.Errorf("issued tokens: %s: client %q: %q is not a SHA-256; move the file aside to drop every issued token", s.path, name, t.SHA256)
			}
		}
		s.byClient[name] = tokens
	}
	return s, nil
}

// Create makes a random 256-bit token for client, keeps its hash and
// returns the token, which exists nowhere else: the caller shows it once.
// The file is written before Create returns.
func (s *Issued) Create(client string, now time.Time) (string, IssuedToken, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", IssuedToken{}, err
	}
	token := "mcpgate_" + hex.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	hexSum := hex.EncodeToString(sum[:])
	t := IssuedToken{ID: hexSum[:12], SHA256: hexSum, Created: now.UnixMicro()}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.byClient)
	next[client] = append(slices.Clone(next[client]), t)
	if err := s.write(next); err != nil {
		return "", IssuedToken{}, err
	}
	s.byClient = next
	return token, t, nil
}

// Revoke forgets the token of client whose ID is id, and reports whether
// there was one. The file is written before Revoke returns.
func (s *Issued) Revoke(client, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tokens := s.byClient[client]
	i := slices.IndexFunc(tokens, func(t IssuedToken) bool { return t.ID == id })
	if i < 0 {
		return false, nil
	}
	next := maps.Clone(s.byClient)
	next[client] = slices.Delete(slices.Clone(tokens), i, i+1)
	if len(next[client]) == 0 {
		delete(next, client)
	}
	if err := s.write(next); err != nil {
		return false, err
	}
	s.byClient = next
	return true, nil
}

// Prune forgets the tokens of every client not in names (a client the
// configuration no longer defines: a client added back later under the
// same name does not inherit them) and returns the clients it dropped.
func (s *Issued) Prune(names []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var dropped []string
	next := maps.Clone(s.byClient)
	for name := range s.byClient {
		if !slices.Contains(names, name) {
			delete(next, name)
			dropped = append(dropped, name)
		}
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	slices.Sort(dropped)
	if err := s.write(next); err != nil {
		return nil, err
	}
	s.byClient = next
	return dropped, nil
}

// Tokens returns the tokens issued for client, oldest first.
func (s *Issued) Tokens(client string) []IssuedToken {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.byClient[client])
}

// hashes returns the hashes of client's tokens.
func (s *Issued) hashes(client string) [][]byte {
	var out [][]byte
	for _, t := range s.Tokens(client) {
		sum, _ := hex.DecodeString(t.SHA256)
		out = append(out, sum)
	}
	return out
}

// write replaces the file with byClient, atomically: a crash leaves the
// old file or the new one. s.mu is held.
func (s *Issued) write(byClient map[string][]IssuedToken) error {
	doc := issuedDocument{
		Comment: "Tokens mcpgated issued over D-Bus (CreateToken), by client: their SHA-256, never the tokens. RevokeToken removes one.",
		Clients: byClient,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("issued tokens: %w", err)
	}
	f, err := os.CreateTemp(dir, IssuedFile+".*")
	if err != nil {
		return fmt.Errorf("issued tokens: %w", err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), s.path)
	}
	if err != nil {
		return fmt.Errorf("issued tokens: writing %s: %w", s.path, err)
	}
	return nil
}
