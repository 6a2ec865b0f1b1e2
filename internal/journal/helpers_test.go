package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// realJournal starts a private journald and a Writer for it.
func realJournal(t *testing.T) (*journaldtest.Journald, *Writer) {
	t.Helper()
	j := journaldtest.Start(t)
	w, err := NewWriter(WriterOptions{Socket: j.Socket()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return j, w
}

// fakeJournal is a unixgram socket standing in for journald in tests that
// check the bytes on the wire; they need no root.
type fakeJournal struct {
	path string
	conn *net.UnixConn
}

func newFakeJournal(t *testing.T) *fakeJournal {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fakeJournal{path: path, conn: c}
}

// receivedEntry is one entry as the fake journal got it.
type receivedEntry struct {
	fields map[string]string
	names  []string // in order, repeated names repeated
	viaFD  bool     // came as a sealed memfd
}

// next returns the next entry sent, failing t after 5 s.
func (f *fakeJournal) next(t *testing.T) receivedEntry {
	t.Helper()
	if err := f.conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := f.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatalf("fake journal: %v", err)
	}
	data := buf[:n]
	viaFD := false
	if oobn > 0 {
		if n != 0 {
			t.Fatalf("fake journal: datagram with %d bytes and a descriptor", n)
		}
		data = readPassedMemfd(t, oob[:oobn])
		viaFD = true
	}
	fields, names, err := parseNative(data)
	if err != nil {
		t.Fatalf("fake journal: %v", err)
	}
	return receivedEntry{fields: fields, names: names, viaFD: viaFD}
}

func readPassedMemfd(t *testing.T, oob []byte) []byte {
	t.Helper()
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("fake journal: control messages %v, %v", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("fake journal: rights %v, %v", fds, err)
	}
	file := os.NewFile(uintptr(fds[0]), "passed")
	defer file.Close()
	seals, err := unix.FcntlInt(file.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatalf("fake journal: F_GET_SEALS: %v", err)
	}
	want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if seals&want != want {
		t.Errorf("memfd seals = %#x, want %#x set", seals, want)
	}
	fi, err := file.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// The offset is shared with the sender, who left it at the end.
	data, err := io.ReadAll(io.NewSectionReader(file, 0, fi.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// parseNative decodes the journal native protocol, as journald does.
func parseNative(b []byte) (map[string]string, []string, error) {
	fields := map[string]string{}
	var names []string
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return nil, nil, fmt.Errorf("unterminated field %q", b)
		}
		line := b[:nl]
		if eq := bytes.IndexByte(line, '='); eq >= 0 {
			name := string(line[:eq])
			fields[name] = string(line[eq+1:])
			names = append(names, name)
			b = b[nl+1:]
			continue
		}
		name := string(line)
		b = b[nl+1:]
		if len(b) < 8 {
			return nil, nil, fmt.Errorf("field %s: short length", name)
		}
		size := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if uint64(len(b)) < size+1 || b[size] != '\n' {
			return nil, nil, fmt.Errorf("field %s: bad binary value of %d bytes", name, size)
		}
		fields[name] = string(b[:size])
		names = append(names, name)
		b = b[size+1:]
	}
	return fields, names, nil
}
