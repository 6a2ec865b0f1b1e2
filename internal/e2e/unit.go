package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Unit describes a transient service for RunUnit.
type Unit struct {
	// Properties are systemd-run --property= assignments, such as
	// "User=nobody" or "SystemCallFilter=@system-service"; repeating a list
	// property adds to it, as in a unit file.
	Properties []string
	// Stdin is the service's standard input; nil means none. Its standard
	// output and error come back in UnitResult (systemd-run --pipe).
	Stdin io.Reader
}

// UnitResult is how a transient service ended.
type UnitResult struct {
	// Result holds what the service printed and systemd-run's exit status.
	Result
	// Unit is the service's name, e2e-run-<random>.service.
	Unit string
	// ServiceResult is the unit's Result= property: "success", "exit-code",
	// "signal", "core-dump", "timeout", …
	ServiceResult string
	// Code says how the main process ended: "exited", "killed" or "dumped".
	Code string
	// Status is the exit status when Code is "exited", else the signal
	// number (31 is SIGSYS, what a seccomp filter kills with).
	Status int
}

// RunUnit runs args as a transient service of the container's systemd
// (`systemd-run --wait --pipe --service-type=exec`) with the given
// properties, waits for it to end, and reports how it ended. The error is
// nil whenever the service ran, however it ended; it is non-nil when the
// service could not be created (say, a bad property) or ctx ended first (the
// service is then stopped).
func (c *Container) RunUnit(ctx context.Context, u Unit, args ...string) (UnitResult, error) {
	name := "e2e-run-" + randomHex(4) + ".service"
	argv := []string{"systemd-run", "--wait", "--pipe", "--quiet", "--service-type=exec", "--unit=" + name}
	for _, p := range u.Properties {
		argv = append(argv, "--property="+p)
	}
	argv = append(append(argv, "--"), args...)
	res, runErr := c.Exec(ctx, u.Stdin, argv...)
	ur := UnitResult{Result: res, Unit: name}

	// From here on ctx may be done; these must still run.
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if ctx.Err() != nil {
		_, _ = c.Exec(bg, nil, "systemctl", "stop", name)
		return ur, fmt.Errorf("unit %s (%s): %w", name, shellQuote(args), ctx.Err())
	}
	if runErr == nil {
		// A service that succeeded is unloaded at once; nothing to ask.
		ur.ServiceResult, ur.Code, ur.Status = "success", "exited", 0
		return ur, nil
	}
	show, err := c.Exec(bg, nil, "systemctl", "show", name, "--property=LoadState,Result,ExecMainCode,ExecMainStatus")
	if err != nil {
		return ur, fmt.Errorf("unit %s: %w; then: %w", name, runErr, err)
	}
	props := parseProperties(show.Stdout)
	if props["LoadState"] != "loaded" {
		return ur, fmt.Errorf("unit %s did not run: %w", name, runErr)
	}
	// A failed unit stays loaded until reset.
	defer func() { _, _ = c.Exec(bg, nil, "systemctl", "reset-failed", name) }()
	ur.ServiceResult = props["Result"]
	ur.Status, _ = strconv.Atoi(props["ExecMainStatus"])
	switch props["ExecMainCode"] { // CLD_* from waitid(2)
	case "1":
		ur.Code = "exited"
	case "2":
		ur.Code = "killed"
	case "3":
		ur.Code = "dumped"
	default:
		ur.Code = props["ExecMainCode"]
	}
	return ur, nil
}

// parseProperties parses `systemctl show` output.
func parseProperties(s string) map[string]string {
	props := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			props[k] = v
		}
	}
	return props
}

// JournalEntry is one journal entry as `journalctl --output=json` prints
// it: field name to value. A field that is not valid UTF-8 or appears more
// than once holds its raw JSON.
type JournalEntry map[string]string

// AwaitJournal follows the container's journal from the start of the boot
// (`journalctl --boot --follow --lines=all --output=json` plus args, such as
// "--unit=mcpgate.service" or "MCPGATE_BACKEND=demo") until match accepts an
// entry, and returns that entry. It fails when ctx ends first. Waiting on
// the journal this way is an event, not a poll.
func (c *Container) AwaitJournal(ctx context.Context, match func(JournalEntry) bool, args ...string) (JournalEntry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	argv := append([]string{"journalctl", "--boot", "--follow", "--lines=all", "--output=json", "--no-pager"}, args...)
	cmd := c.Command(ctx, argv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("in container: %s: %w", shellQuote(argv), err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("in container: %s: %w", shellQuote(argv), err)
	}
	defer func() {
		cancel() // journalctl --follow never ends by itself
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		entry, err := parseJournalEntry(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("in container: %s: %w", shellQuote(argv), err)
		}
		if match(entry) {
			return entry, nil
		}
	}
	err = sc.Err()
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	if err == nil {
		err = errors.New("journalctl ended")
	}
	return nil, fmt.Errorf("in container: %s: no matching entry: %w (stderr: %s)", shellQuote(argv), err, strings.TrimSpace(stderr.String()))
}

// Journal returns the entries of the container's current boot that
// `journalctl --boot --output=json` plus args (such as "--unit=mcpgate.service"
// or "MCPGATE_BACKEND=demo") prints now, oldest first.
func (c *Container) Journal(ctx context.Context, args ...string) ([]JournalEntry, error) {
	argv := append([]string{"journalctl", "--boot", "--output=json", "--no-pager"}, args...)
	res, err := c.Exec(ctx, nil, argv...)
	if err != nil {
		return nil, err
	}
	var entries []JournalEntry
	for line := range strings.SplitSeq(res.Stdout, "\n") {
		if line == "" {
			continue
		}
		entry, err := parseJournalEntry([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("in container: %s: %w", shellQuote(argv), err)
		}
		entries = append(entries, entry)
	}
	return entries, nil
}

// parseJournalEntry parses one line of `journalctl --output=json`.
func parseJournalEntry(line []byte) (JournalEntry, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, fmt.Errorf("bad JSON line %q: %w", line, err)
	}
	entry := make(JournalEntry, len(raw))
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			entry[k] = s
		} else {
			entry[k] = string(v)
		}
	}
	return entry, nil
}
