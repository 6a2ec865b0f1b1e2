// Package ctl implements mcpgatectl, the command-line control tool.
package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// Version is set at build time like the daemon's.
var Version = "dev"

// Exit codes, documented in mcpgatectl(1). They follow systemctl's where
// the situations match.
const (
	exitOK = 0
	// exitFailed: the operation failed (a backend did not start, a reload
	// was refused, check-config found errors, any other error).
	exitFailed = 1
	// exitUsage: wrong command, arguments or options.
	exitUsage = 2
	// exitNotHealthy: "status NAME" found the backend not healthy, as
	// "systemctl status" exits 3 for a unit that is not active.
	exitNotHealthy = 3
	// exitAccessDenied: the gateway refused the change (systemctl's 4).
	exitAccessDenied = 4
	// exitNoSuchBackend: no backend of that name (systemctl's 5 for a
	// unit that is not found).
	exitNoSuchBackend = 5
	// exitNotRunning: the gateway is not on the bus, or the bus is
	// unreachable (LSB's "program is not running").
	exitNotRunning = 7
)

// Timeouts of D-Bus calls: reads are quick; changes wait for backends to
// start and may wait for a polkit password prompt.
const (
	readTimeout   = 25 * time.Second
	changeTimeout = 5 * time.Minute
)

// Commands returns the name of every mcpgatectl command, as dispatched by
// Main and listed by "mcpgatectl help".
func Commands() []string {
	return []string{"status", "start", "stop", "restart", "reload", "tools", "logs", "check-config", "token", "clients", "integrity", "bridge", "import", "help", "version"}
}

const usage = `usage: mcpgatectl [OPTIONS] COMMAND [ARGS]

Control the mcpgate MCP gateway.

Commands:
  status [NAME]          show the gateway and its backends, or one backend
  start NAME             start a backend
  stop NAME              stop a backend and keep it stopped
  restart NAME           restart a backend, resetting its restart counter
  reload                 re-read the configuration and apply it
  tools                  list the tools the gateway exposes
  logs NAME [-f] [-n N]  show a backend's journal entries
  logs --client NAME     show a client's calls and policy refusals
  check-config [PATH]    validate a configuration file (default ` + config.DefaultPath + `)
  token create NAME [--tools GLOB ...] [--resources GLOB ...] [--prompts GLOB ...]
                    [--print] [--config PATH]
                         make a client with a new bearer token; it may use
                         every tool, resource and prompt, except that each
                         of --tools, --resources and --prompts given limits
                         that list to what its patterns match
  token list             list the configured clients
  token revoke NAME      remove a client token create made
  token add NAME         have the running gateway issue another token for
                         client NAME (shown once; kept only as a hash)
  token revoke NAME ID   have the running gateway revoke a token it issued
  clients                list the gateway's clients: sessions, last seen,
                         issued tokens
  integrity list [NAME]  list tools, prompts and templates held back for review
  integrity diff NAME [ITEM ...]
                         show what changed since the approved baseline
  integrity approve NAME ID ...
                         serve exactly the versions diff showed (KIND:NAME@FINGERPRINT)
  integrity reject NAME ID ...
                         keep them held back and stop reporting them
  integrity reset        re-baseline after an unreadable state file
  bridge [--socket PATH | --url URL] [--token-file FILE]
                         relay MCP between stdin/stdout and the gateway
  import FILE            print [backends.*] TOML for a Claude Desktop,
                         .mcp.json or VS Code mcp.json file
  help                   show this help
  version                print the version

Options:
  --user                 talk to the gateway of the user's session bus
  --json                 print status and tools as JSON
  --no-ask-password      do not let polkit ask for a password
  --version              print the version

Exit status: 0 ok, 1 failed, 2 usage, 3 backend not healthy (status NAME),
4 access denied, 5 no such backend, 7 gateway not running.
`

// Main runs mcpgatectl with args and returns its exit code.
func Main(args []string) int {
	return run(args, os.Stdin, os.Stdout, os.Stderr)
}

// options are the flags every command accepts.
type options struct {
	user          bool
	json          bool
	noAskPassword bool
	version       bool
	help          bool
}

func (o *options) register(fs *flag.FlagSet) {
	// The defaults are the values so far: options before the command stay
	// set when the command's own flag set parses the rest.
	fs.BoolVar(&o.user, "user", o.user, "")
	fs.BoolVar(&o.json, "json", o.json, "")
	fs.BoolVar(&o.noAskPassword, "no-ask-password", o.noAskPassword, "")
	fs.BoolVar(&o.version, "version", o.version, "")
	fs.BoolVar(&o.help, "help", o.help, "")
	fs.BoolVar(&o.help, "h", o.help, "")
}

// cli is one invocation.
type cli struct {
	opts   options
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	// Options may come before the command; bridge and import parse
	// everything after their name themselves.
	fs := c.flagSet("mcpgatectl")
	if err := fs.Parse(args); err != nil {
		return c.usageError(err)
	}
	args = fs.Args()
	switch {
	case c.opts.version:
		fmt.Fprintln(stdout, "mcpgatectl", Version)
		return exitOK
	case c.opts.help:
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd := "status"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "bridge":
		if c.opts.user { // "mcpgatectl --user bridge": the user's socket
			args = append([]string{"--user"}, args...)
		}
		return runBridge(args, stdin, stdout, stderr)
	case "import":
		return runImport(args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version":
		fmt.Fprintln(stdout, "mcpgatectl", Version)
		return exitOK
	}
	commands := map[string]struct {
		minArgs, maxArgs int
		run              func(c *cli, args []string) int
	}{
		"status":       {0, 1, (*cli).status},
		"start":        {1, 1, func(c *cli, a []string) int { return c.control("start", a[0]) }},
		"stop":         {1, 1, func(c *cli, a []string) int { return c.control("stop", a[0]) }},
		"restart":      {1, 1, func(c *cli, a []string) int { return c.control("restart", a[0]) }},
		"reload":       {0, 0, (*cli).reload},
		"tools":        {0, 0, (*cli).tools},
		"logs":         {0, 1, nil}, // parses its own flags
		"token":        {1, 2, nil}, // parses its own flags
		"integrity":    {1, 1, nil}, // parses its own arguments
		"check-config": {0, 1, (*cli).checkConfig},
		"clients":      {0, 0, (*cli).clients},
	}
	spec, ok := commands[cmd]
	if !ok {
		return c.usageError(fmt.Errorf("unknown command %q", cmd))
	}
	switch cmd {
	case "logs":
		return c.logs(args)
	case "token":
		return c.token(args)
	case "integrity":
		return c.integrity(args)
	}
	pos, err := parseInterleaved(c.flagSet("mcpgatectl "+cmd), args)
	if err != nil {
		return c.usageError(err)
	}
	if c.opts.help {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if len(pos) < spec.minArgs || len(pos) > spec.maxArgs {
		return c.usageError(fmt.Errorf("%s takes %s", cmd, argCount(spec.minArgs, spec.maxArgs)))
	}
	return spec.run(c, pos)
}

func argCount(lo, hi int) string {
	switch {
	case hi == 0:
		return "no arguments"
	case lo == hi:
		return "a backend name"
	}
	return "at most one argument"
}

// flagSet returns a flag set with the common options, quiet on errors.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.opts.register(fs)
	return fs
}

// parseInterleaved parses args with fs, allowing flags after positional
// arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (c *cli) usageError(err error) int {
	fmt.Fprintf(c.stderr, "mcpgatectl: %v\nRun 'mcpgatectl help' for usage.\n", err)
	return exitUsage
}

// dial connects to the gateway's bus.
func (c *cli) dial() (*dbusapi.Client, int) {
	client, err := dbusapi.Dial(c.opts.user)
	if err != nil {
		return nil, c.fail(err)
	}
	client.Interactive = !c.opts.noAskPassword && isTerminal(c.stdin)
	return client, exitOK
}

// withClient dials the running gateway and runs fn with a context of
// timeout; it returns fn's exit code, or the one for a failed dial.
func (c *cli) withClient(timeout time.Duration, fn func(ctx context.Context, client *dbusapi.Client) int) int {
	client, code := c.dial()
	if client == nil {
		return code
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return fn(ctx, client)
}

// fail reports err and returns the exit code it calls for.
func (c *cli) fail(err error) int {
	code := exitCode(err)
	msg := err.Error()
	switch code {
	case exitNotRunning:
		bus := "system"
		if c.opts.user {
			bus = "session"
		}
		msg = fmt.Sprintf("mcpgate is not running on the %s bus (%v)", bus, err)
		if states, ok := askSystemd(c.opts.user); ok {
			if why := describeNotRunning(states, bus, c.opts.user); why != "" {
				msg = why
			}
		}
	case exitAccessDenied:
		if !strings.Contains(msg, "access denied") && !strings.Contains(msg, "Access denied") {
			msg = "access denied: " + msg
		}
	}
	fmt.Fprintf(c.stderr, "mcpgatectl: %s\n", strings.TrimSuffix(msg, "\n"))
	return code
}

// exitCode maps an error from the gateway to an exit code.
func exitCode(err error) int {
	if dbusapi.NotRunning(err) {
		return exitNotRunning
	}
	switch dbusapi.ErrorName(err) {
	case dbusapi.ErrorNoSuchBackend:
		return exitNoSuchBackend
	case dbusapi.ErrorAccessDenied, "org.freedesktop.DBus.Error.AccessDenied":
		return exitAccessDenied
	}
	return exitFailed
}

// isTerminal reports whether f is an *os.File on a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
	return err == nil
}

// colour reports whether output to w may use colours.
func colour(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

func (c *cli) control(verb, name string) int {
	return c.withClient(changeTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		var err error
		switch verb {
		case "start":
			err = client.StartBackend(ctx, name)
		case "stop":
			err = client.StopBackend(ctx, name)
		case "restart":
			err = client.RestartBackend(ctx, name)
		}
		if err != nil {
			return c.fail(err)
		}
		return exitOK
	})
}

func (c *cli) reload(_ []string) int {
	return c.withClient(changeTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		if err := client.Reload(ctx); err != nil {
			if dbusapi.ErrorName(err) == dbusapi.ErrorInvalidConfig {
				fmt.Fprintf(c.stderr, "mcpgatectl: reload refused, the running configuration stays in effect:\n%s\n", err)
				return exitFailed
			}
			return c.fail(err)
		}
		return exitOK
	})
}
