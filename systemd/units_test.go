// Package systemd_test checks the unit, sysusers.d and tmpfiles.d files with systemd's own tools.
package systemd_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// The worst "systemd-analyze security" scores accepted: of the gateway,
// and of a backend's unit, which runs third-party code.
const (
	maxExposure        = 2.5
	maxBackendExposure = 2.0
)

// installPath returns where a package installs the file name from here.
func installPath(name string) string {
	switch filepath.Ext(name) {
	case ".sysusers":
		return "usr/lib/sysusers.d/mcpgate.conf"
	case ".tmpfiles":
		return "usr/lib/tmpfiles.d/mcpgate.conf"
	default:
		return "usr/lib/systemd/system/" + name
	}
}

func lookTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		testutil.Unavailable(t, "%s not installed: %v", name, err)
	}
	return path
}

// run runs a command to completion and returns its combined output.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// install copies the files in names into a new root at their installed paths.
func install(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, installPath(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// unitRoot returns a root holding the host's units (for sysinit.target and
// friends), ours installed, stubs for our programs and copies of the host
// programs the units run.
func unitRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")); err != nil {
		t.Fatalf("copy the host's units: %v\n%s", err, out)
	}
	install(t, root, "mcpgate.socket", "mcpgate.service", "mcpgate-backend@.service")
	// The programs this project installs are stubs here.
	for _, p := range []string{"usr/bin/mcpgated", "usr/bin/mcpgatectl", "usr/libexec/mcpgate/backend-exec"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"usr/bin/busctl"} {
		if out, err := run(t, "cp", "/"+p, filepath.Join(root, p)); err != nil {
			t.Fatalf("copy /%s: %v\n%s", p, err, out)
		}
	}
	return root
}

func TestVerify(t *testing.T) {
	analyze := lookTool(t, "systemd-analyze")
	root := unitRoot(t)
	// Without --root verify would look for /usr/bin/mcpgated on this
	// machine. It exits 0 on unknown keys and bad values and only prints
	// them, so any output fails the test.
	out, err := run(t, analyze, "verify", "--man=no", "--root="+root, "mcpgate.socket", "mcpgate.service", "mcpgate-backend@github.service")
	if err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestSecurity(t *testing.T) {
	analyze := lookTool(t, "systemd-analyze")
	root := unitRoot(t)
	for _, tc := range []struct {
		unit string
		max  float64
	}{
		{"mcpgate.service", maxExposure},
		{"mcpgate-backend@github.service", maxBackendExposure},
	} {
		out, err := run(t, analyze, "security", "--offline=yes", "--no-pager", "--root="+root, tc.unit)
		if err != nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", tc.unit, err, out)
		}
		m := regexp.MustCompile(`Overall exposure level for ` + regexp.QuoteMeta(tc.unit) + `: ([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no overall exposure level in:\n%s", out)
		}
		score, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("systemd-analyze security --offline=yes %s: exposure %.1f (want %.1f or better)", tc.unit, score, tc.max)
		if score > tc.max {
			t.Errorf("%s: exposure %.1f, want %.1f or better:\n%s", tc.unit, score, tc.max, out)
		}
	}
}

// sysusersRoot returns a root where systemd-sysusers has created our user.
func sysusersRoot(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "needs root to create files owned by another user (run through make check)")
	}
	sysusers := lookTool(t, "systemd-sysusers")
	root := t.TempDir()
	install(t, root, "mcpgate.sysusers", "mcpgate.tmpfiles")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, sysusers, "--root="+root); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	return root
}

// lookup returns the fields of name's line in a passwd or group file.
func lookup(t *testing.T, file, name string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if fields := strings.Split(lines.Text(), ":"); fields[0] == name {
			return fields
		}
	}
	t.Fatalf("no %s in %s", name, file)
	return nil
}

func TestSysusers(t *testing.T) {
	root := sysusersRoot(t)
	pw := lookup(t, filepath.Join(root, "etc/passwd"), "mcpgate")
	gr := lookup(t, filepath.Join(root, "etc/group"), "mcpgate")
	if uid, _ := strconv.Atoi(pw[2]); uid == 0 || uid >= 1000 {
		t.Errorf("uid %s, want a system user", pw[2])
	}
	if pw[3] != gr[2] {
		t.Errorf("primary gid %s, want group mcpgate (%s)", pw[3], gr[2])
	}
	if pw[5] != "/var/lib/mcpgate" {
		t.Errorf("home %s, want the StateDirectory /var/lib/mcpgate", pw[5])
	}
	if !strings.HasSuffix(pw[6], "nologin") {
		t.Errorf("shell %s, want nologin", pw[6])
	}
	// The backend units' group: a system group of its own, with no members.
	backends := lookup(t, filepath.Join(root, "etc/group"), "mcpgate-backend")
	if gid, _ := strconv.Atoi(backends[2]); gid == 0 || gid >= 1000 || backends[2] == gr[2] || backends[3] != "" {
		t.Errorf("group mcpgate-backend = %q, want a system group of its own without members", backends)
	}
}

func TestTmpfiles(t *testing.T) {
	root := sysusersRoot(t)
	tmpfiles := lookTool(t, "systemd-tmpfiles")
	if out, err := run(t, tmpfiles, "--root="+root, "--create"); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(root, "run/mcpgate"))
	if err != nil {
		t.Fatal(err)
	}
	// Group members must reach mcpgate.sock (0660, group mcpgate) inside.
	if !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Errorf("/run/mcpgate mode %v, want directory 0750", fi.Mode())
	}
	pw := lookup(t, filepath.Join(root, "etc/passwd"), "mcpgate")
	st := fi.Sys().(*syscall.Stat_t)
	if strconv.Itoa(int(st.Uid)) != pw[2] || strconv.Itoa(int(st.Gid)) != pw[3] {
		t.Errorf("/run/mcpgate owned by %d:%d, want mcpgate:mcpgate (%s:%s)", st.Uid, st.Gid, pw[2], pw[3])
	}
}

// unitFile parses a unit file into section.Key → values, in order.
func unitFile(t *testing.T, name string) map[string][]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	section := ""
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		default:
			k, v, _ := strings.Cut(line, "=")
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	return keys
}

// TestDecisions pins the settings issue 3 asks for, which verify cannot judge.
func TestDecisions(t *testing.T) {
	socket := unitFile(t, "mcpgate.socket")
	service := unitFile(t, "mcpgate.service")
	backend := unitFile(t, "mcpgate-backend@.service")
	tests := []struct {
		unit map[string][]string
		key  string
		want []string // nil: must be absent
	}{
		{socket, "Socket.ListenStream", []string{"127.0.0.1:7431", "/run/mcpgate/mcpgate.sock"}},
		{socket, "Socket.FileDescriptorName", []string{"http"}},
		{socket, "Socket.Accept", []string{"no"}},
		{socket, "Socket.SocketMode", []string{"0660"}},
		{socket, "Socket.SocketGroup", []string{"mcpgate"}},
		{service, "Unit.Documentation", []string{"man:mcpgated(8)"}},
		{service, "Service.Type", []string{"notify"}},
		{service, "Service.NotifyAccess", []string{"main"}},
		{service, "Service.ExecStart", []string{"/usr/bin/mcpgated --config=/etc/mcpgate/mcpgate.toml"}},
		{service, "Service.Restart", []string{"on-failure"}},
		{service, "Service.KillMode", []string{"mixed"}},
		{service, "Service.User", []string{"mcpgate"}},
		{service, "Service.StateDirectory", []string{"mcpgate"}},
		{service, "Service.CacheDirectory", []string{"mcpgate"}},
		{service, "Service.CapabilityBoundingSet", []string{""}},
		{service, "Service.RestrictAddressFamilies", []string{"AF_UNIX AF_INET AF_INET6"}},
		{service, "Service.SystemCallFilter", []string{"@system-service pkey_alloc pkey_free pkey_mprotect"}},
		{service, "Service.DynamicUser", nil},
		{service, "Service.RuntimeDirectory", []string{"mcpgate-backends"}}, // never mcpgate: stopping would delete the socket's directory
		{service, "Service.MemoryDenyWriteExecute", nil},                    // V8 needs W+X
		{service, "Service.Environment", []string{"HOME=%S/mcpgate", "npm_config_cache=%C/mcpgate/npm", "XDG_CACHE_HOME=%C/mcpgate"}},
		{service, "Service.SupplementaryGroups", []string{"mcpgate-backend"}}, // to give the exec socket to the backend units' group
		// Issue 15: each backend a unit of its own.
		{backend, "Unit.StopPropagatedFrom", []string{"mcpgate.service"}},
		{backend, "Unit.PartOf", nil}, // would restart the instances before the new mcpgated listens
		{backend, "Unit.After", nil},  // any ordering with mcpgate.service deadlocks its start
		{backend, "Unit.Before", nil},
		{backend, "Service.Type", []string{"exec"}},
		{backend, "Service.ExecStart", []string{"/usr/libexec/mcpgate/backend-exec %i"}},
		{backend, "Service.ExecStopPost", []string{"/usr/libexec/mcpgate/backend-exec --stopped %i"}}, // the reason of a failure in the unit's journal
		{backend, "Service.Restart", []string{"no"}},
		{backend, "Service.KillMode", []string{"control-group"}},
		{backend, "Service.DynamicUser", []string{"yes"}},
		{backend, "Service.User", []string{"mcpgate-%i"}},
		{backend, "Service.Group", []string{"mcpgate-backend"}}, // static: the only group that may connect to the exec socket
		{backend, "Service.StateDirectory", []string{"mcpgate-backend/%i"}},
		{backend, "Service.CacheDirectory", []string{"mcpgate-backend/%i"}},
		{backend, "Service.Environment", []string{"HOME=%S/mcpgate-backend/%i", "npm_config_cache=%C/mcpgate-backend/%i/npm", "XDG_CACHE_HOME=%C/mcpgate-backend/%i"}},
		{backend, "Service.LogExtraFields", []string{"MCPGATE_BACKEND=%i"}},
		{backend, "Service.SyslogIdentifier", []string{"mcpgate-%i"}},
		{backend, "Service.CapabilityBoundingSet", []string{""}},
		{backend, "Service.SystemCallFilter", service["Service.SystemCallFilter"]},
		{backend, "Service.MemoryDenyWriteExecute", nil},
	}
	for _, tt := range tests {
		if got := tt.unit[tt.key]; strings.Join(got, "\n") != strings.Join(tt.want, "\n") || (got == nil) != (tt.want == nil) {
			t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
		}
	}
	for _, key := range []string{"NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices",
		"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
		"RestrictNamespaces", "RestrictSUIDSGID", "LockPersonality"} {
		for name, unit := range map[string]map[string][]string{"mcpgate.service": service, "mcpgate-backend@.service": backend} {
			if got := unit["Service."+key]; len(got) != 1 || got[0] != "yes" {
				t.Errorf("%s: Service.%s = %q, want yes", name, key, got)
			}
		}
	}
	if got := service["Service.ProtectSystem"]; len(got) != 1 || got[0] != "strict" {
		t.Errorf("Service.ProtectSystem = %q, want strict", got)
	}
	if got := service["Service.ExecReload"]; len(got) != 1 || !strings.Contains(got[0], "org.mcpgate.Gateway1.Manager Reload") {
		t.Errorf("Service.ExecReload = %q, want a synchronous D-Bus Reload call", got)
	}

	// Stopping must outlast drain_timeout (10s) plus the backend grace
	// periods (5s + 5s).
	const stopNeeds = 10*time.Second + 5*time.Second + 5*time.Second
	if d := duration(t, service, "Service.TimeoutStopSec"); d <= stopNeeds {
		t.Errorf("TimeoutStopSec=%v, want above %v", d, stopNeeds)
	}
	if d := duration(t, service, "Service.WatchdogSec"); d != 30*time.Second {
		t.Errorf("WatchdogSec=%v, want 30s", d)
	}
}

func duration(t *testing.T, unit map[string][]string, key string) time.Duration {
	t.Helper()
	v := unit[key]
	if len(v) != 1 {
		t.Fatalf("%s = %q, want one value", key, v)
	}
	d, err := time.ParseDuration(v[0])
	if err != nil {
		t.Fatalf("%s = %q: %v (use a Go-parsable span like 30s)", key, v[0], err)
	}
	return d
}
