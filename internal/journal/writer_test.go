package journal

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

func TestSanitizeFieldName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"MESSAGE", "MESSAGE"},
		{"backend", "BACKEND"},
		{"http.status-code", "HTTP_STATUS_CODE"},
		{"_PID", "PID"},
		{"__x", "X"},
		{"-x", "X"},
		{"9lives", "X_9LIVES"},
		{"", ""},
		{"___", ""},
		{"ünï", "N__"},
		{strings.Repeat("a", 70), strings.Repeat("A", 64)},
		{"9" + strings.Repeat("a", 70), "X_9" + strings.Repeat("A", 61)},
	} {
		if got := SanitizeFieldName(tc.in); got != tc.want {
			t.Errorf("SanitizeFieldName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEntrySerialisation(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"MESSAGE", "hello", "MESSAGE=hello\n"},
		{"MESSAGE", "", "MESSAGE=\n"},
		{"MESSAGE", "a=b", "MESSAGE=a=b\n"},
		{"MESSAGE", "two\nlines", "MESSAGE\n\x09\x00\x00\x00\x00\x00\x00\x00two\nlines\n"},
		{"lower", "v", "LOWER=v\n"},
		{"___", "dropped", ""},
	} {
		var e Entry
		e.Add(tc.name, tc.value)
		if got := string(e.buf); got != tc.want {
			t.Errorf("Add(%q, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
		}
		var eb Entry
		eb.AddBytes(tc.name, []byte(tc.value))
		if got := string(eb.buf); got != tc.want {
			t.Errorf("AddBytes(%q, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
}

func TestWriterFakeJournal(t *testing.T) {
	fj := newFakeJournal(t)
	w, err := NewWriter(WriterOptions{Socket: fj.path})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	var e Entry
	e.Add("MESSAGE", "small")
	if err := w.Send(&e); err != nil {
		t.Fatal(err)
	}
	got := fj.next(t)
	if got.viaFD || got.fields["MESSAGE"] != "small" {
		t.Errorf("small entry = %+v", got)
	}

	big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB, beyond any datagram
	e.Reset()
	e.Add("MESSAGE", big+"\nand a second line")
	e.Add("OTHER", "x")
	if err := w.Send(&e); err != nil {
		t.Fatal(err)
	}
	got = fj.next(t)
	if !got.viaFD {
		t.Error("1 MiB entry did not come as a memfd")
	}
	if got.fields["MESSAGE"] != big+"\nand a second line" || got.fields["OTHER"] != "x" {
		t.Errorf("1 MiB entry lost data: %d bytes", len(got.fields["MESSAGE"]))
	}
}

func TestWriterNoJournal(t *testing.T) {
	w, err := NewWriter(WriterOptions{Socket: filepath.Join(t.TempDir(), "absent")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var e Entry
	e.Add("MESSAGE", "x")
	if err := w.Send(&e); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Send to a missing socket = %v, want ENOENT", err)
	}
}

// TestWriterJournald sends through a real journald: a multi-line message in
// the binary-safe form, odd bytes, and entries that need the memfd path.
func TestWriterJournald(t *testing.T) {
	j, w := realJournal(t)
	big := strings.Repeat("ABCDEFGHIJKLMNOP", 64<<10) // 1 MiB
	for _, tc := range []struct {
		name, msg string
		viaFD     bool
	}{
		{"plain", "hello journal", false},
		{"multi-line", "first line\nsecond line\n\nfourth = line\n", false},
		{"odd bytes", "tab\there, NUL \x00 and =", false},
		{"one MiB", big, true},
		{"one MiB multi-line", big + "\n" + big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := w.fdSends.Load()
			var e Entry
			e.Add("MESSAGE", tc.msg)
			e.Add("SYSLOG_IDENTIFIER", "writer-test")
			e.Add("TEST_CASE", tc.name)
			e.Add("priority", "5")
			if err := w.Send(&e); err != nil {
				t.Fatal(err)
			}
			if viaFD := w.fdSends.Load() > before; viaFD != tc.viaFD {
				t.Errorf("sent via memfd = %v, want %v", viaFD, tc.viaFD)
			}
			got := j.AwaitMatch(t, 1, journaldtest.Entry{"TEST_CASE": tc.name})[0]
			if got["MESSAGE"] != tc.msg {
				t.Errorf("MESSAGE: got %d bytes %.60q, want %d bytes %.60q", len(got["MESSAGE"]), got["MESSAGE"], len(tc.msg), tc.msg)
			}
			if got["PRIORITY"] != "5" || got["_TRANSPORT"] != "journal" {
				t.Errorf("PRIORITY=%q _TRANSPORT=%q", got["PRIORITY"], got["_TRANSPORT"])
			}
		})
	}
}
