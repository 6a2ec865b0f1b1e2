package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkCockpitDeb checks the mcpgate-cockpit package that `make deb` built
// into dist beside the main one: lintian finds nothing at all, it holds the
// page and the documentation Debian wants, and it depends on what the page
// needs. TestDeb calls it, to build the packages only once.
func checkCockpitDeb(t *testing.T, dist, version string) {
	deb := filepath.Join(dist, "mcpgate-cockpit_"+version+"_all.deb")
	if _, err := os.Stat(deb); err != nil {
		t.Fatalf("make deb did not build the Cockpit package: %v", err)
	}
	t.Run("lintian", func(t *testing.T) {
		// Not even warnings: the package is four text files.
		out, err := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
		var tags []string
		for _, line := range strings.Split(string(out), "\n") {
			if len(line) > 2 && strings.Contains("EWI", line[:1]) && line[1] == ':' {
				tags = append(tags, line)
			}
		}
		if err != nil || len(tags) > 0 {
			t.Errorf("lintian %s: %v\n%s", filepath.Base(deb), err, out)
		}
	})
	t.Run("contents", func(t *testing.T) {
		var files []string
		for _, line := range strings.Split(run(t, "", nil, "dpkg-deb", "--contents", deb), "\n") {
			f := strings.Fields(line)
			if len(f) >= 6 && !strings.HasSuffix(f[5], "/") {
				files = append(files, strings.TrimPrefix(f[5], "."))
			}
		}
		want := []string{
			"/usr/share/cockpit/mcpgate/index.html",
			"/usr/share/cockpit/mcpgate/manifest.json",
			"/usr/share/cockpit/mcpgate/mcpgate.css",
			"/usr/share/cockpit/mcpgate/mcpgate.js",
			"/usr/share/doc/mcpgate-cockpit/changelog.gz",
			"/usr/share/doc/mcpgate-cockpit/copyright",
		}
		slices.Sort(files)
		if !slices.Equal(files, want) {
			t.Errorf("files %q, want %q", files, want)
		}
	})
	t.Run("control", func(t *testing.T) {
		for field, want := range map[string]string{
			"Package":      "mcpgate-cockpit",
			"Version":      version,
			"Architecture": "all",
			"Depends":      "cockpit-bridge, mcpgate",
		} {
			if got := strings.TrimSpace(run(t, "", nil, "dpkg-deb", "--field", deb, field)); got != want {
				t.Errorf("%s: %q, want %q", field, got, want)
			}
		}
	})
}

// TestCockpitManifest checks that the page's manifest is the JSON Cockpit
// reads, with an entry in its menu that opens index.html.
func TestCockpitManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "cockpit", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Menu map[string]struct {
			Label string `json:"label"`
		} `json:"menu"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("cockpit/manifest.json: %v", err)
	}
	if m.Menu["index"].Label == "" {
		t.Errorf("cockpit/manifest.json: no menu entry \"index\" with a label: %s", b)
	}
	if _, err := os.Stat(filepath.Join(root, "cockpit", "index.html")); err != nil {
		t.Error(err)
	}
}
