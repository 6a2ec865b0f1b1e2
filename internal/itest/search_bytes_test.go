package itest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// recordedTools writes the tools/list of the real npm servers recorded in
// internal/toolsearch/testdata, named as a gateway exposes them
// (server__tool), as a fakeserver --tools-file, and returns its path and
// how many tools it holds.
func recordedTools(t *testing.T) (string, int) {
	t.Helper()
	data, err := os.ReadFile("../toolsearch/testdata/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Servers []struct {
			Name  string           `json:"name"`
			Tools []map[string]any `json:"tools"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var tools []map[string]any
	for _, s := range c.Servers {
		for _, tool := range s.Tools {
			tool["name"] = s.Name + "__" + tool["name"].(string)
			tools = append(tools, tool)
		}
	}
	out, _ := json.Marshal(tools)
	path := filepath.Join(t.TempDir(), "recorded.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, len(tools)
}

// listBytes returns the bytes of every page of tools/list a session at
// url receives, and the tools listed.
func listBytes(t *testing.T, url string) (bytes, tools int) {
	t.Helper()
	c := newRawClient(t, url)
	cursor := ""
	for id := 2; ; id++ {
		params := "{}"
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		body := c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":%s}`, id, params))
		bytes += len(body)
		var page struct {
			Result struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor string            `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("tools/list: %v: %.300s", err, body)
		}
		tools += len(page.Result.Tools)
		if cursor = page.Result.NextCursor; cursor == "" {
			return bytes, tools
		}
	}
}

// TestSearchModeListBytes measures the target of search mode on the real
// definitions of 340 tools of 24 npm servers: what a client receives for
// tools/list in search mode is under 5% of what the whole catalog costs.
// The figures go in BENCHMARKS.md.
func TestSearchModeListBytes(t *testing.T) {
	file, n := recordedTools(t)
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, fmt.Sprintf(`
[backends.rec]
command = %q
args = ["--tools-file", %q]
tool_prefix = ""

# The recorded tools only, not the fake server's own.
[profiles.all]
tools = ["*__*"]

[profiles.search]
tools = ["*__*"]
search = true
`, bins.Fake, file))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	base := strings.TrimSuffix(d.URL, "/mcp")
	full, listed := listBytes(t, base+"/mcp/all")
	if listed != n {
		t.Fatalf("the whole catalog lists %d tools, want the %d recorded", listed, n)
	}
	search, meta := listBytes(t, base+"/mcp/search")
	ratio := 100 * float64(search) / float64(full)
	t.Logf("tools/list of %d tools: %d bytes; in search mode (%d meta-tools): %d bytes, %.2f%%", listed, full, meta, search, ratio)
	if ratio >= 5 {
		t.Errorf("search mode's tools/list is %.2f%% of the whole catalog's; the target is under 5%%", ratio)
	}
}
