package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLintian runs Debian 13's lintian, which the trixie root has, on both
// packages: no error and no warning, and no override shipped for any
// (issue 46, item 1). Bookworm's lintian is the host's: TestDeb runs it in
// packaging, on the same packages.
func TestLintian(t *testing.T) {
	Require(t)
	OnlyOn(t, "bookworm's lintian is the host's, which TestDeb (packaging) runs", "trixie")
	deb, how := packageToInstall(t)
	cockpit, _ := filepath.Glob(filepath.Join(filepath.Dir(deb), "mcpgate-cockpit_*_all.deb"))
	if len(cockpit) != 1 {
		t.Fatalf("no single mcpgate-cockpit_*_all.deb beside %s (make deb builds both): %v", deb, cockpit)
	}
	root := PrepareRoot(t)
	c := Boot(t, Config{Root: root.Dir})
	var debs []string
	for _, p := range []string{deb, cockpit[0]} {
		in := "/srv/lintian/" + filepath.Base(p) // readable by nobody, unlike /root
		c.CopyFile(t, p, in, 0o644)
		debs = append(debs, in)
	}
	version := c.Run(t, "lintian", "--version")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// As an unprivileged user, as lintian prefers; --display-info shows the
	// informational tags too, in the log.
	args := append([]string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
		"env", "HOME=/tmp", "lintian", "--display-info", "--tag-display-limit", "0"}, debs...)
	res, err := c.Exec(ctx, nil, args...)
	var bad, info []string
	for line := range strings.SplitSeq(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "E: "), strings.HasPrefix(line, "W: "):
			bad = append(bad, line)
		case line != "":
			info = append(info, line)
		}
	}
	for _, line := range info {
		t.Logf("%s: %s", version, line)
	}
	if len(bad) > 0 {
		t.Errorf("%s on %s reports:\n%s", version, how, strings.Join(bad, "\n"))
	}
	// Exit 1 comes with tags at the failing levels; anything else means
	// lintian could not check the packages.
	if err != nil && (res.ExitCode != 1 || len(bad) == 0) {
		t.Errorf("%s: %v\n%s", version, err, res.Stderr)
	}
	for _, d := range debs {
		if overrides := c.Run(t, "sh", "-c", "dpkg-deb --contents "+d+" | grep -c lintian/overrides || true"); overrides != "0" {
			t.Errorf("%s ships lintian overrides", d)
		}
	}
	if !t.Failed() {
		t.Logf("%s: no error, no warning on %s (%d informational tags)", version, strings.Join(debs, ", "), len(info))
	}
}
