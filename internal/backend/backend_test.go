package backend

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRingKeepsRecentLinesPerChild(t *testing.T) {
	r := newRing()
	for i := range ringLines + 5 {
		r.add(100, []byte(strings.Repeat("a", i%3)+"x"))
	}
	r.add(200, []byte("second child"))
	// The last line of the first child is i = ringLines+4, so "aax".
	if got := r.tail(2, 0); !slices.Equal(got, []string{"aax", "second child"}) {
		t.Errorf("tail(2, any) = %q", got)
	}
	if got := r.tail(10, 200); !slices.Equal(got, []string{"second child"}) {
		t.Errorf("tail of the second child = %q; want only its own line", got)
	}
	if got := r.tail(1000, 0); len(got) != ringLines {
		t.Errorf("ring holds %d lines, want %d", len(got), ringLines)
	}
	if got := r.tail(5, 300); len(got) != 0 {
		t.Errorf("tail of a silent child = %q", got)
	}
}

func TestRingCutsLongLinesBetweenCharacters(t *testing.T) {
	r := newRing()
	r.add(1, []byte(strings.Repeat("é", ringLineMax))) // 2 bytes each
	got := r.tail(1, 1)[0]
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > ringLineMax+len("…") {
		t.Errorf("cut line is %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}

func TestChildEnvDropsTheDaemonsVariables(t *testing.T) {
	base := []string{"PATH=/bin", "NOTIFY_SOCKET=/run/x", "LISTEN_FDS=2", "LISTEN_PID=1", "LISTEN_FDNAMES=http", "WATCHDOG_USEC=1", "WATCHDOG_PID=1", "JOURNAL_STREAM=1:2", "HOME=/root"}
	env := ChildEnv(base, map[string]string{"HOME": "/var/lib/mcpgate", "TOKEN": "t"})
	slices.Sort(env)
	want := []string{"HOME=/var/lib/mcpgate", "PATH=/bin", "TOKEN=t"}
	if !slices.Equal(env, want) {
		t.Errorf("ChildEnv = %q, want %q", env, want)
	}
}
