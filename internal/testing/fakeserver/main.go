package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// envPrefix prefixes the environment variables that set flags.
const envPrefix = "MCPGATE_FAKE_"

// options are the behaviours chosen at start.
type options struct {
	name                  string
	instructions          string
	tools                 []string
	pageSize              int
	crashAfter            int64
	crashCode             int
	exitAtStart           int
	stderrAtStart         string
	ignoreSigterm         bool
	ignoreEOF             bool
	handshakeDelay        time.Duration
	initializeBarrier     int
	noInitializeResponse  bool
	listChangedBeforeInit bool
	resources             int
	prompts               bool
	record                string
	ping                  string
	noToolsIf             string
	toolsFile             string

	// sleeper mode, used for the grandchildren of spawn_grandchild.
	sleeper           bool
	sleeperDoubleFork bool
	sleeperMax        time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run starts the fake server (or a sleeper) and returns the exit code.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts, err := parseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fakeserver:", err)
		return 2
	}
	if opts.ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
	}
	if opts.sleeper {
		return runSleeper(opts, stdout, stderr)
	}
	if opts.stderrAtStart != "" {
		fmt.Fprintln(stderr, opts.stderrAtStart)
	}
	if opts.exitAtStart >= 0 {
		return opts.exitAtStart
	}

	s, err := newServer(opts, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fakeserver:", err)
		return 1
	}
	defer s.close()
	if err := s.serve(stdin); err != nil {
		fmt.Fprintln(stderr, "fakeserver:", err)
		return 1
	}
	if opts.ignoreEOF {
		sleepForever()
	}
	return 0
}

// parseOptions reads flags, taking defaults from MCPGATE_FAKE_* variables.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	var o options
	var tools string
	fs := flag.NewFlagSet("fakeserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.name, "name", "fakeserver", "serverInfo name")
	fs.StringVar(&o.instructions, "instructions", "", "instructions in the initialize result")
	fs.StringVar(&tools, "tools", "", "comma-separated extra no-op tools")
	fs.IntVar(&o.pageSize, "page-size", 0, "items per page of list results (0 = all)")
	fs.Int64Var(&o.crashAfter, "crash-after", -1, "exit on the tools/call after the first N (-1 = never)")
	fs.IntVar(&o.crashCode, "crash-code", 1, "exit code for --crash-after")
	fs.IntVar(&o.exitAtStart, "exit-at-start", -1, "exit with this code at start (-1 = no)")
	fs.StringVar(&o.stderrAtStart, "stderr-at-start", "", "line written to stderr at start")
	fs.BoolVar(&o.ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM")
	fs.BoolVar(&o.ignoreEOF, "ignore-eof", false, "keep running after stdin EOF")
	fs.DurationVar(&o.handshakeDelay, "handshake-delay", 0, "delay before the initialize result")
	fs.IntVar(&o.initializeBarrier, "initialize-barrier", 0, "answer initialize only once the --record file holds this many initialize requests")
	fs.BoolVar(&o.noInitializeResponse, "no-initialize-response", false, "never answer initialize")
	fs.BoolVar(&o.listChangedBeforeInit, "list-changed-before-init", false, "send tools/list_changed before the initialize result")
	fs.IntVar(&o.resources, "resources", 0, "number of fake://r/I resources")
	fs.BoolVar(&o.prompts, "prompts", false, "offer the prompt greet and its completion")
	fs.StringVar(&o.record, "record", "", "append every line read from stdin to this file")
	fs.StringVar(&o.noToolsIf, "no-tools-if", "", "list no tools when this file exists at start")
	fs.StringVar(&o.toolsFile, "tools-file", "", "a JSON array of tool objects, read at start, listed as written")
	fs.StringVar(&o.ping, "ping", "answer", `how to treat ping: "answer", "never" (read it, never answer) or "unknown" (-32601)`)
	fs.BoolVar(&o.sleeper, "sleeper", false, "internal: run as a grandchild that prints its PID and sleeps")
	fs.BoolVar(&o.sleeperDoubleFork, "sleeper-double-fork", false, "internal: start a sleeper, print its PID and exit")
	fs.DurationVar(&o.sleeperMax, "sleeper-max", 10*time.Minute, "internal: a sleeper's longest life")

	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(key); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = errors.Join(envErr, fmt.Errorf("environment %s=%q: %w", key, v, err))
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.initializeBarrier > 0 && o.record == "" {
		return nil, errors.New("--initialize-barrier needs --record: the barrier counts the initialize requests recorded there")
	}
	if o.ping != "answer" && o.ping != "never" && o.ping != "unknown" {
		return nil, fmt.Errorf("--ping %q: use answer, never or unknown", o.ping)
	}
	if tools != "" {
		o.tools = strings.Split(tools, ",")
	}
	return &o, nil
}

// sleepForever blocks until the process is killed. A timer keeps the Go
// runtime from declaring a deadlock.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}
