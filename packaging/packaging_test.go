// Package packaging checks the Debian package that `make deb` builds, the
// version scheme, and the configuration files the package installs.
package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// root is the top of the checkout; tests run in packaging/.
const root = ".."

func lookTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Unavailable(t, "%s is not installed (packaging/ci/deps.sh installs what make deb needs): %v", tool, err)
		}
	}
}

// run runs a command and returns its standard output; it fails the test
// with the standard error when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func TestVersionFromDescribe(t *testing.T) {
	tests := []struct{ describe, want string }{
		{"v1.2.3-0-gabc1234", "1.2.3"},
		{"v1.2.3-5-gabc1234", "1.2.3+5.gabc1234"},
		{"v1.2.3-rc1-0-gabc1234", "1.2.3~rc1"},
		{"v1.2.3-rc1-5-gabc1234", "1.2.3~rc1+5.gabc1234"},
		{"v1.2.3-beta-2-0-gabc1234", "1.2.3~beta~2"},
		{"v1.2.3-0-gabc1234-dirty", "1.2.3+dirty"},
		{"v1.2.3-5-gabc1234-dirty", "1.2.3+5.gabc1234.dirty"},
		{"v1.2.3+ds-2-gabc1234", "1.2.3+ds.2.gabc1234"},
		{"v10.0.0-12-g0123456", "10.0.0+12.g0123456"},
	}
	for _, tt := range tests {
		got := strings.TrimSpace(run(t, root, nil, "packaging/deb/version.sh", "--describe", tt.describe))
		if got != tt.want {
			t.Errorf("version.sh --describe %s = %q, want %q", tt.describe, got, tt.want)
		}
	}
	// A tag that cannot become a Debian version is refused.
	cmd := exec.Command("packaging/deb/version.sh", "--describe", "v1.2_3-0-gabc1234")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("version.sh accepted tag v1.2_3: %s", out)
	}
}

// TestVersionOrder checks that later builds get higher versions in dpkg's
// ordering, so that installing a newer .deb is an upgrade.
func TestVersionOrder(t *testing.T) {
	lookTools(t, "dpkg")
	ascending := []string{
		"0.0.0~dev",
		"0.0.0+git20251122044512.abc1234",
		"0.0.0+git20251122044513.0000000",
		"0.0.0+git20251123000000.fff0000",
		"1.0.0~rc1",
		"1.0.0~rc1+1.gabc1234",
		"1.0.0~rc2",
		"1.0.0",
		"1.0.0+1.gabc1234",
		"1.0.0+1.gabc1234.dirty",
		"1.0.0+2.gabc1234",
		"1.0.0+10.g0000000",
		"1.0.1~rc1",
		"1.0.1",
	}
	for i := 1; i < len(ascending); i++ {
		a, b := ascending[i-1], ascending[i]
		if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg does not order %s before %s", a, b)
		}
	}
}

// TestVersionFromGit runs version.sh in a scratch repository through its
// life: no commit, commits without a tag, a release, commits after it.
func TestVersionFromGit(t *testing.T) {
	lookTools(t, "git", "dpkg")
	repo := t.TempDir()
	script, err := filepath.Abs(filepath.Join(root, "packaging/deb/version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org"}
	git := func(date string, args ...string) {
		run(t, repo, append(base, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date), "git", args...)
	}
	version := func() string { return strings.TrimSpace(run(t, repo, base, script)) }
	commit := func(date, content string) {
		if err := os.WriteFile(filepath.Join(repo, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git(date, "add", "f")
		git(date, "commit", "-q", "-m", content)
	}

	git("2025-01-01T00:00:00Z", "init", "-q")
	var seen []string
	step := func(want string) {
		t.Helper()
		got := version()
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("version %q, want one matching %s", got, want)
		}
		seen = append(seen, got)
	}
	step(`^0\.0\.0~dev$`)
	commit("2025-11-22T04:45:12Z", "one")
	step(`^0\.0\.0\+git20251122044512\.[0-9a-f]{7}$`)
	commit("2025-11-22T04:45:13Z", "two")
	step(`^0\.0\.0\+git20251122044513\.[0-9a-f]{7}$`)
	git("2025-11-22T05:00:00Z", "tag", "v1.0.0-rc1")
	step(`^1\.0\.0~rc1$`)
	commit("2025-11-22T06:00:00Z", "three")
	git("2025-11-22T06:00:00Z", "tag", "v1.0.0")
	step(`^1\.0\.0$`)
	commit("2025-11-22T07:00:00Z", "four")
	step(`^1\.0\.0\+1\.g[0-9a-f]+$`)
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("uncommitted"), 0o644); err != nil {
		t.Fatal(err)
	}
	step(`^1\.0\.0\+1\.g[0-9a-f]+\.dirty$`)
	// --rev names a commit, never dirty: the upgrade test's starting point.
	rev := func(r string) string { return strings.TrimSpace(run(t, repo, base, script, "--rev", r)) }
	if got, want := rev("HEAD~1"), "1.0.0"; got != want {
		t.Errorf("version.sh --rev HEAD~1: %q, want %q", got, want)
	}
	if got := rev("HEAD~3"); !regexp.MustCompile(`^0\.0\.0\+git20251122044512\.[0-9a-f]{7}$`).MatchString(got) {
		t.Errorf("version.sh --rev HEAD~3: %q, want the version of the first commit", got)
	}
	if out, err := exec.Command(script, "--rev", "nosuch").CombinedOutput(); err == nil || !strings.Contains(string(out), "nosuch is no commit") {
		t.Errorf("version.sh --rev nosuch: %v, %q; want an error naming it", err, out)
	}
	for i := 1; i < len(seen); i++ {
		if err := exec.Command("dpkg", "--compare-versions", seen[i-1], "lt", seen[i]).Run(); err != nil {
			t.Errorf("dpkg does not order %s before %s", seen[i-1], seen[i])
		}
	}
}

// TestDefaultConfig checks the configuration the package installs: as
// shipped it is valid, defines no backends and changes no default; its
// commented-out settings ("#key = value") are the real defaults; and the
// example drop-in, uncommented, is valid.
func TestDefaultConfig(t *testing.T) {
	main, err := os.ReadFile("config/mcpgate.toml")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("config/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	load := func(mainText, exampleText string) (*config.Config, error) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "mcpgate.toml"), []byte(mainText), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "conf.d", "example.toml"), []byte(exampleText), 0o644); err != nil {
			t.Fatal(err)
		}
		return config.Load(filepath.Join(dir, "mcpgate.toml"))
	}

	shipped, err := load(string(main), string(example))
	if err != nil {
		t.Fatalf("the shipped configuration is invalid: %v", err)
	}
	if len(shipped.Backends) != 0 {
		t.Errorf("the shipped configuration defines backends %v, want none", shipped.Backends)
	}
	if len(shipped.Files) != 2 {
		t.Errorf("files read %q, want mcpgate.toml and conf.d/example.toml", shipped.Files)
	}
	// The defaults the package changes: under the package's systemd, each
	// backend is a unit of its own, and what backends offer is pinned.
	packaged := config.Default().Gateway
	packaged.Runner = config.RunnerUnit
	packaged.Integrity.Policy = config.IntegrityPin
	if !reflect.DeepEqual(shipped.Gateway, packaged) {
		t.Errorf("the shipped configuration changes defaults:\n got %+v\nwant %+v", shipped.Gateway, packaged)
	}

	settings := uncomment(string(main))
	withSettings, err := load(settings, "")
	if err != nil {
		t.Fatalf("mcpgate.toml with its settings uncommented is invalid: %v\n%s", err, settings)
	}
	if got, want := emptyIsNil(withSettings.Gateway), emptyIsNil(packaged); !reflect.DeepEqual(got, want) {
		t.Errorf("the commented-out settings are not the defaults:\n got %+v\nwant %+v", got, want)
	}
	for _, key := range config.Keys() {
		if name, ok := strings.CutPrefix(key, "gateway."); ok && !strings.Contains(settings, "\n"+name+" = ") {
			t.Errorf("mcpgate.toml does not show the default of %s", key)
		}
	}

	backends, err := load(string(main), uncomment(string(example)))
	if err != nil {
		t.Fatalf("example.toml uncommented is invalid: %v", err)
	}
	if n := len(backends.EnabledBackends()); n < 2 {
		t.Errorf("example.toml uncommented defines %d backends, want several", n)
	}
}

// uncomment turns "#key = value" lines (a "#" directly followed by text)
// into settings; "# prose" stays a comment.
func uncomment(s string) string {
	return regexp.MustCompile(`(?m)^#([^ #\n])`).ReplaceAllString(s, "$1")
}

// emptyIsNil returns g with empty lists made nil.
func emptyIsNil(g config.Gateway) config.Gateway {
	for _, l := range []*[]string{&g.Listen, &g.AllowedOrigins, &g.AllowedHosts} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return g
}

func TestMaintainerScripts(t *testing.T) {
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		path := filepath.Join("deb", script)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable", path)
		}
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", path, err, out)
		}
		if _, err := exec.LookPath("checkbashisms"); err == nil {
			if out, err := exec.Command("checkbashisms", path).CombinedOutput(); err != nil {
				t.Errorf("checkbashisms %s: %v\n%s", path, err, out)
			}
		}
	}
}

// TestDeb builds the package with `make deb`, runs lintian on it, and
// checks its contents, control fields, conffiles and binaries.
func TestDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package and runs lintian; not in -short mode")
	}
	lookTools(t, "make", "dpkg-deb", "dpkg-shlibdeps", "lintian", "scdoc", "gcc", "strip", "git")
	dist := t.TempDir()
	// Build into a directory of our own: a concurrent `make deb` must not
	// strip a binary we are packing.
	out := run(t, root, nil, "make", "--no-print-directory", "deb", "DIST="+dist, "RELEASE="+filepath.Join(dist, "bin"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	deb := lines[len(lines)-1]
	version := strings.TrimSpace(run(t, root, nil, "packaging/deb/version.sh"))
	arch := strings.TrimSpace(run(t, root, nil, "dpkg", "--print-architecture"))
	if want := filepath.Join(dist, "mcpgate_"+version+"_"+arch+".deb"); deb != want {
		t.Fatalf("make deb built %q, want %q", deb, want)
	}

	t.Run("cockpit", func(t *testing.T) { checkCockpitDeb(t, dist, version) })

	// The host's lintian (bookworm's on CI); trixie's runs in the trixie
	// root (TestLintian in internal/e2e). Neither may find an error or a
	// warning, and the package ships no override.
	t.Run("lintian", func(t *testing.T) {
		cmd := exec.Command("lintian", "--display-info", "--tag-display-limit", "0", deb)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var bad []string
		sc := bufio.NewScanner(&stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "E: "), strings.HasPrefix(line, "W: "):
				bad = append(bad, line)
			case line != "":
				t.Logf("lintian: %s", line)
			}
		}
		if len(bad) > 0 {
			t.Errorf("lintian reports errors or warnings:\n%s", strings.Join(bad, "\n"))
		}
		// lintian exits 2 when it could not check the package at all.
		if exit, ok := err.(*exec.ExitError); err != nil && (!ok || exit.ExitCode() != 1 || len(bad) == 0) {
			t.Errorf("lintian: %v\n%s", err, stderr.String())
		}
		if len(bad) == 0 {
			t.Logf("lintian: no errors, no warnings")
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
		// Units in /usr/lib/systemd/system whatever the build host's
		// pkg-config says: nothing under the aliased /lib (trixie's
		// lintian: aliased-location).
		const unitDir = "/usr/lib/systemd/system"
		for _, f := range files {
			if strings.HasPrefix(f, "/lib/") || strings.HasPrefix(f, "/bin/") || strings.HasPrefix(f, "/sbin/") {
				t.Errorf("the package ships %s, under an aliased directory", f)
			}
			if strings.HasPrefix(f, "/usr/share/lintian/") {
				t.Errorf("the package ships %s: no lintian override is needed", f)
			}
		}
		for _, want := range []string{
			"/usr/bin/mcpgated",
			"/usr/bin/mcpgatectl",
			"/usr/libexec/mcpgate/backend-exec",
			unitDir + "/mcpgate.service",
			unitDir + "/mcpgate.socket",
			unitDir + "/mcpgate-backend@.service",
			"/usr/lib/sysusers.d/mcpgate.conf",
			"/usr/lib/tmpfiles.d/mcpgate.conf",
			"/usr/share/dbus-1/system.d/org.mcpgate.Gateway1.conf",
			"/usr/share/dbus-1/system-services/org.mcpgate.Gateway1.service",
			"/usr/share/dbus-1/interfaces/org.mcpgate.Gateway1.xml",
			"/usr/share/polkit-1/actions/org.mcpgate.Gateway1.policy",
			"/usr/share/polkit-1/rules.d/50-mcpgate.rules",
			"/usr/share/man/man1/mcpgatectl.1.gz",
			"/usr/share/man/man5/mcpgate.toml.5.gz",
			"/usr/share/man/man7/mcpgate-dbus.7.gz",
			"/usr/share/man/man8/mcpgated.8.gz",
			"/etc/mcpgate/mcpgate.toml",
			"/etc/mcpgate/conf.d/example.toml",
			"/usr/share/doc/mcpgate/copyright",
			"/usr/share/doc/mcpgate/changelog.gz",
			"/usr/share/doc/mcpgate/examples/haproxy.cfg",
			"/usr/share/doc/mcpgate/examples/envoy.yaml",
		} {
			if !slices.Contains(files, want) {
				t.Errorf("the package lacks %s", want)
			}
		}
		t.Logf("%d files", len(files))
	})

	ctl := t.TempDir()
	run(t, "", nil, "dpkg-deb", "--control", deb, ctl)

	t.Run("control", func(t *testing.T) {
		fields := map[string]string{}
		for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Recommends", "Section", "Priority", "Maintainer", "Description"} {
			fields[f] = strings.TrimSpace(run(t, "", nil, "dpkg-deb", "--field", deb, f))
		}
		want := map[string]string{"Package": "mcpgate", "Version": version, "Architecture": arch, "Recommends": "nodejs, npm"}
		for f, v := range want {
			if fields[f] != v {
				t.Errorf("%s: %q, want %q", f, fields[f], v)
			}
		}
		for _, dep := range []*regexp.Regexp{
			regexp.MustCompile(`(^|, )libc6 \(>= [0-9.]+\)`),
			regexp.MustCompile(`(^|, )dbus(,|$)`),
			regexp.MustCompile(`(^|, )systemd(,|$)`),
			regexp.MustCompile(`(^|, )init-system-helpers \(>= [^)]+\)`),
			regexp.MustCompile(`(^|, )polkitd(,|$)`),
		} {
			if !dep.MatchString(fields["Depends"]) {
				t.Errorf("Depends: %q lacks %s", fields["Depends"], dep)
			}
		}
		for _, f := range []string{"Section", "Priority", "Maintainer", "Description"} {
			if fields[f] == "" {
				t.Errorf("no %s field", f)
			}
		}
		for _, script := range []string{"postinst", "prerm", "postrm"} {
			if fi, err := os.Stat(filepath.Join(ctl, script)); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("maintainer script %s: %v, want mode 0755", script, err)
			}
		}
		if _, err := os.Stat(filepath.Join(ctl, "md5sums")); err != nil {
			t.Error(err)
		}
	})

	t.Run("conffiles", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(string(b))
		want := []string{"/etc/mcpgate/conf.d/example.toml", "/etc/mcpgate/mcpgate.toml"}
		if !slices.Equal(got, want) {
			t.Errorf("conffiles %q, want %q", got, want)
		}
	})

	tree := t.TempDir()
	run(t, "", nil, "dpkg-deb", "--extract", deb, tree)

	// A page with a table must say so on its first line, or man(1) does
	// not run tbl: groff 1.23 (trixie) then warns, and lintian with it.
	t.Run("man", func(t *testing.T) {
		pages, _ := filepath.Glob(filepath.Join(tree, "usr/share/man/man*/*.gz"))
		tables := 0
		for _, page := range pages {
			f, err := os.Open(page)
			if err != nil {
				t.Fatal(err)
			}
			z, err := gzip.NewReader(f)
			if err != nil {
				f.Close()
				t.Fatalf("%s: %v", page, err)
			}
			roff, err := io.ReadAll(z)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", page, err)
			}
			if !bytes.Contains(roff, []byte("\n.TS")) {
				continue
			}
			tables++
			if !bytes.HasPrefix(roff, []byte("'\\\" t\n")) {
				t.Errorf("%s has a table but does not start with the preprocessor hint '\\\" t", filepath.Base(page))
			}
		}
		if tables == 0 {
			t.Error("no page with a table; mcpgated(8) has one")
		}
	})

	t.Run("binaries", func(t *testing.T) {
		for _, name := range []string{"usr/bin/mcpgated", "usr/bin/mcpgatectl", "usr/libexec/mcpgate/backend-exec"} {
			path := filepath.Join(tree, name)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			libs, _ := f.ImportedLibraries()
			if !slices.Contains(libs, "libc.so.6") || f.Section(".interp") == nil {
				t.Errorf("%s: not dynamically linked against libc.so.6 (needs %q)", name, libs)
			}
			if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
				t.Errorf("%s: not stripped", name)
			}
			if f.Type != elf.ET_DYN {
				t.Errorf("%s: ELF type %v, want a position-independent executable", name, f.Type)
			}
			f.Close()
		}
		out := run(t, "", nil, filepath.Join(tree, "usr/bin/mcpgated"), "--version")
		if want := "mcpgated " + version + "\n"; out != want {
			t.Errorf("mcpgated --version: %q, want %q", out, want)
		}
		// The shipped configuration, as installed.
		out = run(t, "", nil, filepath.Join(tree, "usr/bin/mcpgated"), "--check-config", "--config", filepath.Join(tree, "etc/mcpgate/mcpgate.toml"))
		if !strings.Contains(out, "OK (0 backends, 2 files)") {
			t.Errorf("mcpgated --check-config on the installed configuration: %q", out)
		}
	})

	t.Run("copyright", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(tree, "usr/share/doc/mcpgate/copyright"))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if !strings.HasPrefix(text, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
			t.Error("copyright is not in the machine-readable format")
		}
		// Every Go module compiled into the binaries has a stanza.
		for _, name := range []string{"usr/bin/mcpgated", "usr/bin/mcpgatectl", "usr/libexec/mcpgate/backend-exec"} {
			info, err := buildinfo.ReadFile(filepath.Join(tree, name))
			if err != nil {
				t.Fatal(err)
			}
			for _, dep := range info.Deps {
				if !strings.Contains(text, "\nFiles: "+dep.Path+"/*\n") {
					t.Errorf("copyright has no stanza for %s, compiled into %s; add one with its license", dep.Path, name)
				}
			}
		}
	})
}
