package handoff

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// KeySize is the length of the key records are authenticated with.
const KeySize = 32

// KeyFile is the key's file name in the daemon's state directory.
const KeyFile = "handoff.key"

// LoadKey returns the key in dir/handoff.key, making it (random, mode 0600)
// if there is none. A key file that is not a regular file of KeySize bytes
// owned by this user and unreadable to others is refused: a record it
// authenticated proves nothing.
func LoadKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, KeyFile)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return makeKey(dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("handoff key %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("handoff key %s: %w", path, err)
	}
	st, _ := fi.Sys().(*unix.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("handoff key %s is not a regular file; remove it", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("handoff key %s is readable or writable by others (mode %04o); remove it, mcpgated makes a new one", path, fi.Mode().Perm())
	case st != nil && int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("handoff key %s belongs to uid %d, not to mcpgated's %d; remove it", path, st.Uid, os.Geteuid())
	}
	key := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, key)
	if err != io.ErrUnexpectedEOF || n != KeySize {
		return nil, fmt.Errorf("handoff key %s is not %d bytes; remove it, mcpgated makes a new one", path, KeySize)
	}
	return key[:KeySize], nil
}

// makeKey writes a new random key to path, failing if one appeared
// meanwhile.
func makeKey(dir, path string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("handoff key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("handoff key %s: %w", path, err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("handoff key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("handoff key %s: %w", path, err)
	}
	return key, nil
}
