package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKeysCoverFields checks that every settable field of Gateway and
// Backend has a key, so that Keys (and the manual page tested against it)
// cannot silently miss a new setting.
func TestKeysCoverFields(t *testing.T) {
	keys := Keys()
	if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
		t.Errorf("Keys() has duplicates: %q", keys)
	}
	tests := []struct {
		typ     reflect.Type
		prefix  string
		derived []string // fields not set by a key of their own
	}{
		{reflect.TypeFor[Gateway](), "gateway.", nil},
		{reflect.TypeFor[Backend](), "backends.NAME.", []string{"Name", "File", "Line"}},
	}
	for _, tt := range tests {
		var n int
		for _, k := range keys {
			if strings.HasPrefix(k, tt.prefix) {
				n++
			}
		}
		// Embedded structs (Gateway's Limits) count by their own fields.
		fields := 0
		for _, f := range reflect.VisibleFields(tt.typ) {
			if !f.Anonymous {
				fields++
			}
		}
		if want := fields - len(tt.derived); n != want {
			t.Errorf("Keys() has %d keys under %s, want one per settable field of %s (%d)", n, tt.prefix, tt.typ.Name(), want)
		}
	}
}
