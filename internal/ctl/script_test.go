package ctl_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// commands are the scripts' own commands besides testscript's.
var commands = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// exits CODE PROGRAM [ARGS...] runs PROGRAM like exec and checks its
	// exit status, which scripts rely on.
	"exits": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: exits CODE PROGRAM [ARGS...]")
		}
		want, err := strconv.Atoi(args[0])
		if err != nil {
			ts.Fatalf("exits: %v", err)
		}
		got := 0
		if err := ts.Exec(args[1], args[2:]...); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				ts.Fatalf("exits: %v", err)
			}
			got = exit.ExitCode()
		}
		if got != want {
			ts.Fatalf("%s exited with %d, want %d", strings.Join(args[1:], " "), got, want)
		}
	},
}

// TestScripts runs testdata/script: mcpgatectl without a gateway.
func TestScripts(t *testing.T) {
	bins := testutil.Build(t)
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: commands,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", bins.Dir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(env.WorkDir, "no-bus"))
			env.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(env.WorkDir, "no-bus"))
			return nil
		},
	})
}

// TestScriptsDaemon runs testdata/daemon: each script gets a private bus
// and, unless it holds a file "no-gateway", a real mcpgated on it with the
// backends in its file backends.toml (FAKE stands for the fake server).
// A file "system-bus" makes the bus a system bus with the shipped policy;
// a file "session-bus" runs the gateway with bus = "session" and makes the
// bus the session bus of mcpgatectl, whose system bus is then absent.
// A file "auth-required" sets auth = "required". $NOBODY_BIN holds a copy
// of mcpgatectl that user nobody may run.
func TestScriptsDaemon(t *testing.T) {
	bins := testutil.Build(t)
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/daemon",
		Cmds: commands,
		Setup: func(env *testscript.Env) error {
			tb, ok := env.T().(testing.TB)
			if !ok {
				return errors.New("testscript's T is not a testing.TB")
			}
			exists := func(name string) bool {
				_, err := os.Stat(filepath.Join(env.WorkDir, name))
				return err == nil
			}
			var opts dbustest.Options
			if exists("system-bus") {
				if os.Getuid() != 0 {
					tb.Skip("needs root for the system bus policy and setpriv")
				}
				opts = dbustest.Options{System: true, Include: []string{filepath.Join(testutil.ModuleRoot(), "packaging", "dbus", "org.mcpgate.Gateway1.conf")}}
			}
			bus := dbustest.Start(tb, opts)
			env.Setenv("PATH", bins.Dir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address)
			env.Setenv("FAKE", bins.Fake)
			// Build's directory is private to root; nobody needs a copy.
			ctl, err := os.ReadFile(bins.Ctl)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(bus.Dir, "mcpgatectl"), ctl, 0o755); err != nil {
				return err
			}
			env.Setenv("NOBODY_BIN", bus.Dir)
			if exists("no-gateway") {
				return nil
			}
			backends, err := os.ReadFile(filepath.Join(env.WorkDir, "backends.toml"))
			if err != nil {
				return err
			}
			busKind, busEnv := "system", "DBUS_SYSTEM_BUS_ADDRESS="
			if exists("session-bus") {
				busKind, busEnv = "session", "DBUS_SESSION_BUS_ADDRESS="
				env.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(env.WorkDir, "no-bus"))
				env.Setenv("DBUS_SESSION_BUS_ADDRESS", bus.Address)
			}
			auth := "none"
			if exists("auth-required") {
				auth = "required"
			}
			toml, url := testutil.ConfigWith(tb, strings.ReplaceAll(string(backends), "FAKE", bins.Fake), testutil.ConfigOptions{Bus: busKind, Auth: auth})
			d := testutil.StartDaemon(tb, toml, url, testutil.DaemonOptions{Env: []string{busEnv + bus.Address, "STATE_DIRECTORY=" + filepath.Join(env.WorkDir, "state")}})
			env.Setenv("CONFIG", d.ConfigPath)
			return nil
		},
	})
}
