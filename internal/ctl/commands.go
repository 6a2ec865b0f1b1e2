package ctl

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcpgate/mcpgate/internal/config"
)

// unit is the systemd unit mcpgated runs as, system-wide and per user.
const unit = "mcpgate.service"

// logs runs journalctl for one backend: the entries mcpgated wrote with
// MCPGATE_BACKEND=NAME (the backend's stderr and MCP log messages, and
// the gateway's own messages about it) from the mcpgate unit.
func (c *cli) logs(args []string) int {
	fs := c.flagSet("mcpgatectl logs")
	follow := fs.Bool("follow", false, "")
	fs.BoolVar(follow, "f", false, "")
	lines := fs.Int("lines", -1, "")
	fs.IntVar(lines, "n", -1, "")
	client := fs.String("client", "", "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return c.usageError(err)
	}
	if c.opts.help {
		fmt.Fprint(c.stdout, usage)
		return exitOK
	}
	match := ""
	switch {
	case *client != "" && len(pos) == 0:
		match = "MCPGATE_CLIENT=" + *client // the audit entries of its calls
	case *client == "" && len(pos) == 1:
		match = "MCPGATE_BACKEND=" + pos[0]
	default:
		return c.usageError(fmt.Errorf("logs takes a backend name, or --client NAME"))
	}
	path, err := exec.LookPath("journalctl")
	if err != nil {
		fmt.Fprintf(c.stderr, "mcpgatectl: %v\n", err)
		return exitFailed
	}
	argv := journalctlArgs(match, c.opts.user, *follow, *lines)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		fmt.Fprintf(c.stderr, "mcpgatectl: exec %s: %v\n", path, err)
	}
	return exitFailed
}

// journalctlArgs returns journalctl's argv for the entries with the field
// match FIELD=VALUE. journalctl ANDs the unit's matches with it.
func journalctlArgs(match string, user, follow bool, lines int) []string {
	argv := []string{"journalctl"}
	if user {
		argv = append(argv, "--user-unit="+unit)
	} else {
		argv = append(argv, "--unit="+unit)
	}
	argv = append(argv, match)
	if follow {
		argv = append(argv, "--follow")
	}
	if lines >= 0 {
		argv = append(argv, "--lines="+strconv.Itoa(lines))
	}
	return argv
}

// checkConfig validates a configuration exactly as mcpgated --check-config
// does, and prints the same.
func (c *cli) checkConfig(args []string) int {
	path := config.DefaultPath
	if len(args) == 1 {
		path = args[0]
	}
	cfg, err := config.Load(path)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(c.stderr, line)
		}
		return exitFailed
	}
	for _, w := range cfg.CredentialsInArgs() {
		fmt.Fprintln(c.stderr, "warning: "+w)
	}
	fmt.Fprintf(c.stdout, "%s: OK (%d backends, %d files)\n", path, len(cfg.Backends), len(cfg.Files))
	return exitOK
}
