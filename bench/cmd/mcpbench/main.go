// Command mcpbench runs mcpgate's benchmark: mcpgate beside the physical
// floor and the Node gateways, in one run, and writes the results as JSON
// and as a Markdown section with SVG plots.
//
// Every process it starts is stopped and reaped when it ends, also on an
// error or an interrupt.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/bench/internal/gateways"
	"github.com/mcpgate/mcpgate/bench/internal/proc"
	"github.com/mcpgate/mcpgate/bench/internal/report"
)

func main() { os.Exit(run(os.Args[1:])) }

// options are the command-line flags.
type options struct {
	bin, npm, node, out, markdown, plots, version, reportOnly, steps string
	baseline                                                         string
	quick, verbose                                                   bool
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("mcpbench", flag.ContinueOnError)
	fs.StringVar(&o.bin, "bin", "bin", "directory with mcpgated, mcpgate-demoserver, benchfloor and benchecho")
	fs.StringVar(&o.npm, "npm", "/var/cache/mcpgate-bench/npm", "directory whose node_modules holds supergateway and mcp-proxy")
	fs.StringVar(&o.node, "node", "node", "the Node.js binary that runs the peers")
	fs.StringVar(&o.out, "out", "bench/results", "directory for the results JSON (and profiles)")
	fs.StringVar(&o.markdown, "markdown", "", "Markdown file whose generated section to replace (e.g. BENCHMARKS.md); empty: none")
	fs.StringVar(&o.plots, "plots", "bench/plots", "directory for the SVG plots, when -markdown is set")
	fs.StringVar(&o.version, "mcpgate-version", "dev", "mcpgate's version, for the record")
	fs.StringVar(&o.reportOnly, "report", "", "render the Markdown and plots from this results file; run nothing")
	fs.StringVar(&o.steps, "steps", "", "comma-separated steps to run (large,load,idle,demo,auth,shared,telemetry,startup,profiles); empty: all")
	fs.StringVar(&o.baseline, "baseline", "", "another build of mcpgated to run beside this one, as mcpgate-base (and mcpgate-shared-base), without the Node peers; ends with a table of this build against it")
	fs.BoolVar(&o.quick, "quick", false, "a smoke test: small loads, a few seconds per scenario")
	fs.BoolVar(&o.verbose, "v", false, "show the gateways' output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.reportOnly != "" {
		r, err := report.Read(o.reportOnly)
		if err == nil {
			err = render(&o, r, o.reportOnly)
		}
		return exit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return exit(bench(ctx, &o))
}

func exit(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, o *options) error {
	for _, p := range []*string{&o.bin, &o.npm, &o.out, &o.baseline} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	work, err := os.MkdirTemp("", "mcpbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var log io.Writer = io.Discard
	if o.verbose {
		log = os.Stderr
	}
	env := &gateways.Env{Bin: o.bin, NPM: o.npm, Node: o.node, Work: work, Log: log}
	var group proc.Group
	defer group.StopAll()

	host, _ := os.Hostname()
	now := time.Now().UTC()
	r := &report.Results{
		Date:     now.Format(time.RFC3339),
		Host:     host,
		Quick:    o.quick,
		Machine:  machine(o.node),
		Versions: versions(o),
	}
	b := &bencher{ctx: ctx, env: env, group: &group, plan: planFor(o.quick), r: r, baseline: o.baseline}
	if o.baseline != "" {
		if o.markdown != "" {
			return errors.New("-baseline with -markdown: a run beside another build does not describe this one alone; render BENCHMARKS.md from a run without -baseline")
		}
		if _, err := os.Stat(o.baseline); err != nil {
			return fmt.Errorf("-baseline: %w", err)
		}
		r.Baseline = o.baseline
		r.Versions[report.BaseName("mcpgate")] = o.baseline
	}
	for _, g := range b.all() {
		r.Gateways = append(r.Gateways, g.Name)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	// Results and profiles are named for the day and the machine.
	prefix := filepath.Join(o.out, fmt.Sprintf("%s-%s", now.Format("2006-01-02"), host))
	if o.quick {
		prefix += "-quick"
	}
	if o.steps != "" {
		prefix += "-partial" // never in place of a whole run's results
	}
	if o.baseline != "" {
		prefix += "-ab"
	}
	// The previous whole run, read before this one may overwrite it (a
	// second run on the same day has the same name).
	prevPath, prev, prevErr := report.Previous(o.out, "")
	steps := []struct {
		key, name string
		run       func() error
	}{
		{"large", "large result", b.largeScenario},
		{"load", "sessions and payloads", b.loadScenarios},
		{"idle", "idle sessions", b.idleScenario},
		{"demo", "demo backend", b.demoScenario},
		{"auth", "authentication: static token and OAuth JWT", b.authScenario},
		{"shared", "a shared host: token, 20-rule policy, audit, limits", b.sharedScenario},
		{"telemetry", "OpenTelemetry: every call traced and measured", b.telemetryScenario},
		{"startup", "start-up", b.startupScenario},
		{"profiles", "profiles of mcpgate", func() error { return b.profileScenario(prefix) }},
	}
	for _, s := range steps {
		if o.steps != "" && !slices.Contains(strings.Split(o.steps, ","), s.key) {
			continue
		}
		fmt.Fprintf(os.Stderr, "mcpbench: %s\n", s.name)
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
	}
	path := prefix + ".json"
	if err := r.Write(path); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mcpbench: results in %s\n", path)
	report.Summary(os.Stdout, r)
	if err := render(o, r, path); err != nil {
		return err
	}
	// Last, so that it is what a run ends with: what got slower.
	if o.baseline != "" {
		report.PrintComparisons(os.Stdout, o.baseline, r)
	} else if prevErr == nil && !o.quick {
		report.PrintRegressions(os.Stdout, prevPath, prev, r, 0.05)
	} else if !o.quick {
		fmt.Fprintf(os.Stdout, "\nno previous whole run in %s to compare CPU per call with\n", o.out)
	}
	return nil
}

// render writes the Markdown section and plots when -markdown is set.
func render(o *options, r *report.Results, resultsPath string) error {
	if o.markdown == "" {
		if o.reportOnly != "" {
			report.Summary(os.Stdout, r)
		}
		return nil
	}
	if err := os.MkdirAll(o.plots, 0o755); err != nil {
		return err
	}
	return report.UpdateMarkdown(o.markdown, o.plots, resultsPath, r)
}
