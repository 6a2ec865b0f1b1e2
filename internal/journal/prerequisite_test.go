package journal

import "testing"

// TestPrerequisiteLogField checks that a prerequisite's lines carry the
// backend's fields and MCPGATE_PREREQUISITE=1, and a backend's do not.
func TestPrerequisiteLogField(t *testing.T) {
	fj := newFakeJournal(t)
	w, err := NewWriter(WriterOptions{Socket: fj.path})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct {
		prerequisite bool
		want         string
	}{{true, "1"}, {false, ""}} {
		bl := NewBackendLog(w, BackendLogOptions{Backend: "db", Prerequisite: tc.prerequisite, PID: 7})
		bl.Line([]byte("listening"), false)
		f := fj.next(t).fields
		bl.Close()
		if f["MCPGATE_PREREQUISITE"] != tc.want || f["MCPGATE_BACKEND"] != "db" || f["MESSAGE"] != "listening" {
			t.Errorf("prerequisite=%v: fields %v", tc.prerequisite, f)
		}
	}
}
