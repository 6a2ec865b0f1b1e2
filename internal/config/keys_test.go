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
		{reflect.TypeFor[Backend](), "backends.NAME.", []string{"Name", "File", "Line", "CommandLine"}},
		{reflect.TypeFor[Client](), "clients.NAME.", []string{"Name", "File", "Line"}},
		{reflect.TypeFor[Composite](), "composites.NAME.", []string{"Name", "File", "Line"}},
		{reflect.TypeFor[Profile](), "profiles.NAME.", []string{"Name", "File", "Line"}},
	}
	for _, tt := range tests {
		var n int
		for _, k := range keys {
			if strings.HasPrefix(k, tt.prefix) {
				n++
			}
		}
		if want := settable(tt.typ) - len(tt.derived); n != want {
			t.Errorf("Keys() has %d keys under %s, want one per settable field of %s (%d)", n, tt.prefix, tt.typ.Name(), want)
		}
	}
}

// settable counts the fields of a config struct, looking into embedded
// groups of keys such as Health.
func settable(typ reflect.Type) int {
	n := 0
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Anonymous && f.Type.Kind() == reflect.Struct {
			n += settable(f.Type)
		} else {
			n++
		}
	}
	return n
}
