package handoff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func testRecord() *Record {
	return &Record{
		BootID: "b0", PID: 42, Version: "1.2",
		Listeners: []Listener{{FD: 5, Name: "http"}},
		Backends: []Backend{{
			Name: "memory", Config: "c1", PID: 77, Stdin: 8, Stdout: 9, Stderr: 10,
			Unread: []byte(`{"jsonrpc":"2.0","id":3,"res`), NextID: 3, Abandoned: []int64{2},
			Handshake: []byte(`{"version":2}`),
		}},
	}
}

// A record reads back as written, and is refused when anything about it is
// not this process's own: a changed byte, another key, another boot,
// another process, another format version, a cut or oversized record.
func TestSealOpen(t *testing.T) {
	key := bytes.Repeat([]byte{1}, KeySize)
	sealed, err := Seal(testRecord(), key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(sealed, key, "b0", 42)
	if err != nil {
		t.Fatalf("Open of what Seal wrote: %v", err)
	}
	if b := got.Backends[0]; b.PID != 77 || string(b.Unread) != `{"jsonrpc":"2.0","id":3,"res` || b.NextID != 3 || len(b.Abandoned) != 1 || got.Listeners[0].Name != "http" {
		t.Errorf("read back %+v", got)
	}

	flip := func(i int) []byte {
		d := bytes.Clone(sealed)
		d[i] ^= 1
		return d
	}
	otherFormat := bytes.Clone(sealed)
	binary.BigEndian.PutUint32(otherFormat[8:], FormatVersion+1)
	for _, tt := range []struct {
		name string
		data []byte
		key  []byte
		boot string
		pid  int
		want error
	}{
		{"a byte of the payload changed", flip(header + 5), key, "b0", 42, ErrTampered},
		{"a byte of the MAC changed", flip(len(sealed) - 1), key, "b0", 42, ErrTampered},
		{"another key", sealed, bytes.Repeat([]byte{2}, KeySize), "b0", 42, ErrTampered},
		{"a previous boot", sealed, key, "b1", 42, ErrForeignBoot},
		{"another process", sealed, key, "b0", 43, ErrForeignProcess},
		{"another format version", otherFormat, key, "b0", 42, ErrFormat},
		{"not a record", []byte("hello, world, this is not a record of any kind at all"), key, "b0", 42, ErrFormat},
		{"cut short", sealed[:len(sealed)-3], key, "b0", 42, ErrFormat},
		{"empty", nil, key, "b0", 42, ErrFormat},
		{"too large", make([]byte, MaxRecordBytes+1), key, "b0", 42, ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Open(tt.data, tt.key, tt.boot, tt.pid)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open = %+v, %v; want %v", rec, err, tt.want)
			}
		})
	}
}

// The record travels in a sealed memfd that nothing can write once sealed.
func TestMemfd(t *testing.T) {
	data := []byte("record")
	f, err := WriteMemfd(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 0); err == nil {
		t.Error("a sealed memfd took a write")
	}
	got, err := ReadFD(int(f.Fd()))
	if err != nil || string(got) != "record" {
		t.Fatalf("ReadFD = %q, %v", got, err)
	}
}

// The key is made once, mode 0600, and read back; a key readable by others
// or of the wrong size is refused, with the way out.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || len(k1) != KeySize {
		t.Fatalf("key file %v (%v), key of %d bytes; want mode 0600 and %d bytes", fi.Mode(), err, len(k1), KeySize)
	}
	k2, err := LoadKey(dir)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second LoadKey = %x, %v; want the same key", k2, err)
	}
	path := filepath.Join(dir, KeyFile)
	os.Chmod(path, 0o644)
	if _, err := LoadKey(dir); err == nil {
		t.Error("a key readable by others was taken")
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, []byte("short"), 0o600)
	if _, err := LoadKey(dir); err == nil {
		t.Error("a key of 5 bytes was taken")
	}
}
