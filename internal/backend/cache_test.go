package backend

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCacheRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog", "gh.json")
	want := &catalogCache{
		server: &ServerInfo{ProtocolVersion: "2025-11-25", Name: "gh", Version: "1.0", Instructions: "use it",
			Capabilities: Capabilities{Tools: &ListCapability{ListChanged: true}, Resources: &ResourceCapability{Subscribe: true}}},
		lists: &Lists{Tools: []json.RawMessage{json.RawMessage(`{"name":"a"}`), json.RawMessage(`{"name":"b","description":"<a> & <b>"}`)},
			Resources: []json.RawMessage{json.RawMessage(`{"uri":"x://1"}`)}},
	}
	if err := writeCache(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readCache(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.server, want.server) || string(got.lists.Tools[0]) != `{"name":"a"}` || string(got.lists.Resources[0]) != `{"uri":"x://1"}` {
		t.Errorf("read back %+v %+v", got.server, got.lists)
	}
	// The server's bytes, not an HTML-escaped spelling of them: integrity
	// pins the bytes, and a respelled item is a change.
	if string(got.lists.Tools[1]) != `{"name":"b","description":"<a> & <b>"}` {
		t.Errorf("read back %s, want the item as the server sent it", got.lists.Tools[1])
	}
	// The write left no temporary file behind.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("cache directory holds %d files, want the cache alone", len(entries))
	}
}

func TestCacheUnreadable(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"truncated", `{"version":1,"protocolVersion":"2025`, "not valid JSON"},
		{"not an object", `[1,2]`, "not valid JSON"},
		{"other version", `{"version":1,"protocolVersion":"2025-11-25"}`, "version 1"},
		{"no protocol version", `{"version":2}`, "without a protocolVersion"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".json")
			os.WriteFile(path, []byte(tt.content), 0o644)
			c, err := readCache(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || c != nil {
				t.Errorf("readCache = %v, %v; want an error saying %q", c, err, tt.want)
			}
		})
	}
	if c, err := readCache(filepath.Join(dir, "missing.json")); c != nil || err != nil {
		t.Errorf("a missing cache: %v, %v; want nil, nil", c, err)
	}
}
