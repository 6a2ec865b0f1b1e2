// Package daemon wires mcpgated together: configuration, backends, catalog,
// the HTTP front, systemd notification, D-Bus and the journal.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/http1"
	"github.com/mcpgate/mcpgate/internal/integrity"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/listeners"
	"github.com/mcpgate/mcpgate/internal/sdnotify"
	"github.com/mcpgate/mcpgate/internal/supervisor"
	"github.com/mcpgate/mcpgate/internal/telemetry"
	"github.com/mcpgate/mcpgate/internal/unitrun"
)

// Version is the daemon's version, set at build time with
// -ldflags "-X github.com/mcpgate/mcpgate/internal/daemon.Version=…".
var Version = "dev"

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // start-up failed, or a required backend could not start
	exitUsage  = 2
)

// Main runs mcpgated with the given arguments and returns its exit code.
func Main(args []string) int {
	fs := flag.NewFlagSet("mcpgated", flag.ContinueOnError)
	cfgPath := fs.String("config", config.DefaultPath, "configuration `file`; *.toml files in conf.d/ beside it are read too")
	check := fs.Bool("check-config", false, "validate the configuration, print what is wrong, and exit 0 (valid) or 1")
	version := fs.Bool("version", false, "print the version and exit")
	journalSocket := fs.String("journal-socket", journal.DefaultSocket, "journald's native protocol `socket`")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mcpgated: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *version {
		fmt.Println("mcpgated", Version)
		return exitOK
	}
	if *check {
		return checkConfig(*cfgPath, os.Stdout, os.Stderr)
	}
	// Main runs on the main thread (see spawner): it starts the backends'
	// processes while run runs the daemon.
	sp := newSpawner()
	code := make(chan int, 1)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		code <- run(context.Background(), options{
			configPath: *cfgPath, journalSocket: *journalSocket,
			environ: os.Environ(), args: os.Args, spawner: sp,
		})
	}()
	sp.serve(ran)
	return <-code
}

// checkConfig validates the configuration like `sshd -t`.
func checkConfig(path string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(path)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, line)
		}
		return exitFailed
	}
	for _, w := range cfg.CredentialsInArgs() {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	// No catalog without the running gateway: only patterns that no
	// backend's prefix can match. Reload checks against the live catalog.
	for _, u := range access.UnmatchedPrefixes(cfg) {
		c := cfg.Clients[u.Client]
		fmt.Fprintf(stderr, "%s:%d: warning: %s\n", c.File, c.Line, u)
	}
	failed := false
	for _, p := range checkCommands(cfg) {
		fmt.Fprintln(stderr, p.err.Error())
		failed = failed || !p.warning
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := checkUnits(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, err.Error())
		failed = true
	}
	if err := checkCgroups(cfg); err != nil {
		fmt.Fprintln(stderr, err.Error())
		failed = true
	}
	var resources strings.Builder
	if err := checkResources(cfg, &resources); err != nil {
		fmt.Fprintln(stderr, err.Error())
		failed = true
	}
	if failed {
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: OK (%d backends, %d files)\n", path, len(cfg.Backends), len(cfg.Files))
	io.WriteString(stdout, resources.String())
	printEras(stdout, cfg)
	return exitOK
}

type options struct {
	configPath    string
	journalSocket string
	// What a re-exec needs (see reexec); without a spawner there is none.
	environ []string // the environment mcpgated started with
	args    []string
	spawner *spawner
}

// daemon is the running gateway. Only the main loop in run changes cfg.
type daemon struct {
	opts    options
	cfg     *config.Config
	log     *slog.Logger
	output  *journal.Output
	notify  *sdnotify.Notifier
	status  *sdnotify.StatusLimiter
	sup     *supervisor.Supervisor
	gw      *gateway.Gateway
	lns     *listeners.Set
	srv     *http1.Server
	metrics *metrics
	tel     *telemetry.Telemetry // OpenTelemetry; nil when [telemetry] is off
	// integrity holds back what backends offer until it is approved.
	integrity *integrity.Store

	clients  atomic.Pointer[access.Set] // the clients in effect; replaced by reload
	refusals *access.Refusals

	// resources is the OAuth resource of each listener, fixed at start
	// (access.ListenerResources); nil when OAuth is off.
	resources map[string]string
	// clientsMu orders replacing the clients with issuing and revoking
	// tokens, so that neither undoes the other.
	clientsMu sync.Mutex
	issued    *access.Issued // tokens issued over D-Bus; nil if unreadable
	issuedErr error          // why issued is nil
	// onSessions are called after a client's session opened or closed.
	onSessions []func()

	// stopStatus stops status's Run once it sent what is pending, and waits
	// for it; nil once called. See finalStatus.
	stopStatus func()
	// stopWatchdog ends the watchdog's rounds; nil without a watchdog.
	stopWatchdog context.CancelFunc

	sinksMu sync.Mutex
	sinks   map[sinkKey]*journal.BackendLog // journal sinks, per backend and instance
	// prereqSinks are the journal sinks of prerequisite processes.
	prereqSinks map[*config.Backend]*journal.BackendLog
	units       *lazyUnits      // watches requires_units
	runner      *unitrun.Runner // starts backends with runner = "unit"; nil if none
	cgroups     *cgroup.Tree    // the delegated cgroup children get cgroups in; nil if none

	ready atomic.Bool // READY=1 sent; /healthz answers "starting" until then

	spawner *spawner // starts the backends' processes and re-executes; nil in tests of run
	stopBus func()   // releases the bus name and closes the connection; once
	// stopTelemetry flushes what is queued for the collector and stops
	// OpenTelemetry; once.
	stopTelemetry func()
	image         image // the binary that runs, which a reload compares with the installed one
	// adopt are the servers the previous image handed on, by backend,
	// until backendOptions gives each to its backend.
	adopt   map[string]*backend.Adopted
	adoptMu sync.Mutex
	// sessions are the client sessions the previous image handed on, until
	// restoreSessions gives them to the gateway.
	sessions []gateway.SessionState

	reloads chan chan error    // reload requests, answered when applied
	ping    chan chan struct{} // liveness probes of the main loop
	// cancelUnmatched drops the last reload's warnings about unmatched
	// patterns while they wait for its backends; main loop only.
	cancelUnmatched context.CancelFunc

	// Hooks for the D-Bus interface, set before the backends start.
	onChange        []func(*backend.Backend) // after any change of a backend
	onCalls         []func(*backend.Backend) // after a change of a backend's call counts
	onAdd, onRemove []func(name string)      // reload added or removed a backend
	onStatus        []func(line string)      // the status line changed
}

func run(ctx context.Context, opts options) int {
	cfg, err := config.Load(opts.configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpgated: invalid configuration:\n%v\n", err)
		return exitFailed
	}
	journalStream := os.Getenv("JOURNAL_STREAM")
	os.Unsetenv("JOURNAL_STREAM") // describes our stderr, not our children's
	output, err := journal.NewOutput(journal.OutputOptions{
		Target: cfg.Gateway.LogTarget, Level: logLevel(cfg.Gateway.LogLevel),
		Socket: opts.journalSocket, JournalStream: journalStream,
		TraceIDs: traceIDs(cfg),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpgated: %v\n", err)
		return exitFailed
	}
	defer output.Close()
	log := slog.New(output.Handler)
	slog.SetDefault(log)

	d := &daemon{
		opts:    opts,
		cfg:     cfg,
		log:     log,
		output:  output,
		notify:  sdnotify.FromEnv(log),
		sinks:   map[sinkKey]*journal.BackendLog{},
		reloads: make(chan chan error),
		ping:    make(chan chan struct{}),
		spawner: opts.spawner,
		image:   currentImage(),
	}
	d.prereqSinks = map[*config.Backend]*journal.BackendLog{}
	d.units = &lazyUnits{session: cfg.Gateway.Bus == "session"}
	return d.run(ctx)
}

func (d *daemon) run(ctx context.Context) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog, err := sdnotify.WatchdogFromEnv(d.notify, d.log)
	if err != nil {
		d.log.Warn("ignoring the watchdog settings", "err", err)
	}
	// Children whose parent exits come back to us, so that killing a
	// backend's process group also lets us reap its grandchildren.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		d.log.Warn("cannot become a child subreaper; orphaned grandchildren of backends go to init", "err", err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// Take the sockets first: connections that arrive before the front
	// serves wait in the listen backlog. After a re-exec they are those
	// the previous image handed on, with its backends.
	if d.lns, err = d.takeOver(); err != nil {
		return d.fail(err)
	}
	if d.lns == nil {
		if d.lns, err = listeners.Open(d.cfg.Gateway.Listen, d.log); err != nil {
			return d.fail(err)
		}
	}
	defer d.lns.Close()

	d.status = sdnotify.NewStatusLimiter(d.notify, 100*time.Millisecond)
	statusCtx, cancelStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		d.status.Run(statusCtx)
	}()
	d.stopStatus = func() {
		cancelStatus()
		<-statusDone
	}
	d.metrics = newMetrics(d)
	d.onRemove = append(d.onRemove, d.metrics.forget)
	stopTelemetry, err := d.startTelemetry()
	if err != nil {
		return d.fail(err)
	}
	d.stopTelemetry = sync.OnceFunc(stopTelemetry)
	defer d.stopTelemetry() // last: what stopping did is exported too
	d.sup = supervisor.New(ctx, supervisor.Options{
		BackendOptions: d.backendOptions,
		OnAdd:          func(name string) { runHooks(d.onAdd, name) },
		OnRemove:       func(name string) { runHooks(d.onRemove, name) },
		OnRemoved:      d.releaseSink,
		Logger:         d.log,
	})
	g := d.cfg.Gateway
	d.integrity = d.newIntegrity(d.cfg)
	d.refusals = access.NewRefusals(d.log)
	d.gw = gateway.New(d.sup, gateway.Options{
		Version:            Version,
		PageSize:           g.PageSize,
		ResumeWindow:       g.ResumeWindow,
		SessionIdleTimeout: g.SessionIdleTimeout,
		MaxSessions:        g.MaxSessions,
		MaxSubscriptions:   g.MaxSubscriptions,
		MaxStreamEvents:    g.MaxStreamEvents,
		Logger:             d.log,
		OnLog:              d.mcpLog,
		OnCatalog:          func(*catalog.Catalog) { d.updateStatus() },
		Audit:              g.Audit == "calls",
		// Status resources show every backend's health to every client.
		StatusResources: g.StatusResources,
		Integrity:       d.integrity,
		Refusals:        d.refusals,
		OnSessions: func() {
			for _, f := range d.onSessions {
				f()
			}
		},
		MaxTasks:          g.MaxTasks,
		MaxTasksPerClient: g.MaxTasksPerClient,
		MaxTaskTTL:        g.MaxTaskTTL,
		FirstListWait:     g.FirstListWait,
		Input: gateway.NewContinuations(gateway.ContinuationOptions{
			Host: hostLabel(), Max: g.MaxInputRequiredCalls, MaxPerClient: g.MaxInputRequiredCallsPerClient,
			Logger: d.log, Refusals: d.refusals,
		}),
		Telemetry: d.tel,
	})
	d.openIssued()
	if err := d.decideResources(); err != nil {
		return d.fail(err)
	}
	d.loadClients(d.cfg)
	d.gw.Configure(d.cfg)
	d.restoreSessions()
	d.onRemove = append(d.onRemove, d.gw.ForgetOutputBytes)
	defer d.units.close()
	go d.gw.Run(ctx)
	// The bus comes up before the backends start, so operators can watch
	// them start; its hooks must be in place before the first change.
	stopBus, err := d.startDBus(ctx)
	if err != nil {
		return d.fail(err)
	}
	d.stopBus = sync.OnceFunc(stopBus)
	defer d.stopBus()
	stopRunner, err := d.startUnitRunner(ctx)
	if err != nil {
		return d.fail(err)
	}
	defer stopRunner()
	if err := d.openCgroups(); err != nil {
		return d.fail(err)
	}
	if d.adopt != nil {
		d.endStrays()
	}
	d.sup.Start(d.cfg)
	d.endUnadopted()
	d.resetUnusedUnits(ctx)
	// On-demand and cli backends settle at once, without a process (idle
	// from their catalog cache, or with their configured tools): the
	// first client, often the one whose connection started the daemon,
	// finds their tools in the catalog.
	supervisor.WaitSettled(ctx, settlingAtOnce(d.sup.Backends()))
	d.gw.Refresh()
	d.updateStatus()

	// Clients are served while the backends start: those that are ready
	// are in the catalog, the others join with list_changed once their
	// handshake ends. No client waits for the slowest backend.
	stopMetrics, err := d.serveMetrics()
	if err != nil {
		d.shutdownBackends()
		return d.fail(err)
	}
	defer stopMetrics()
	if err := d.serve(); err != nil {
		return d.fail(err)
	}
	d.log.Info("serving clients while the backends start", "listeners", listenerNames(d.lns))
	if code, stop := d.awaitBackends(ctx, sigs); stop {
		return code
	}
	// Whoever heard READY=1 finds every settled backend in the catalog:
	// the rebuild a backend's last change started may still be running,
	// and this one waits for it.
	d.gw.Refresh()
	// READY=1 carries the status, so readiness never comes with a stale one.
	d.ready.Store(true) // before READY=1: whoever heard it finds /healthz ok
	d.notify.Send("READY=1", "STATUS="+d.statusLine())
	d.updateStatus()
	d.log.Info("mcpgate is ready", "listeners", listenerNames(d.lns), journal.MessageReady.Attr())
	if watchdog != nil {
		var wdCtx context.Context
		wdCtx, d.stopWatchdog = context.WithCancel(ctx)
		go watchdog.Run(wdCtx, d.alive)
	}
	return d.loop(ctx, sigs)
}

// settlingAtOnce returns the backends that settle without starting a
// process: on-demand ones (see backend.Backend.Catalog) and cli ones.
func settlingAtOnce(all []*backend.Backend) []*backend.Backend {
	var out []*backend.Backend
	for _, b := range all {
		if b.IsCLI() || (b.Config().OnDemand() && !b.Pooled()) {
			out = append(out, b)
		}
	}
	return out
}

// awaitBackends waits until every backend settled, stretching systemd's
// start timeout meanwhile, while the front already serves clients: READY=1
// still means that every backend's first start attempt is decided. stop is
// true when the daemon must exit with code.
func (d *daemon) awaitBackends(ctx context.Context, sigs <-chan os.Signal) (code int, stop bool) {
	const step = 10 * time.Second
	settled := make(chan error, 1)
	go func() { settled <- supervisor.WaitSettled(ctx, d.sup.Backends()) }()
	tick := time.NewTicker(step)
	defer tick.Stop()
	d.notify.ExtendTimeout(3 * step)
	for {
		select {
		case <-settled:
			for _, b := range d.sup.Backends() {
				if st := b.Status(); b.Config().Required && st.State != backend.Healthy && !b.Config().OnDemand() {
					err := fmt.Errorf("required backend %q could not start: %s", b.Name(), st.LastError)
					// STATUS= is world-readable: the cause only, the detail in the journal.
					d.finalStatus(fmt.Sprintf("failed: required backend %q could not start: %s", b.Name(), st.Cause))
					d.notify.Errno(int(unix.EHOSTDOWN))
					d.log.Error(err.Error(), "backend", b.Name())
					d.gw.StopAccepting()
					d.gw.Close()
					d.srv.Close()
					d.shutdownBackends()
					return exitFailed, true
				}
			}
			return 0, false
		case <-tick.C:
			d.notify.ExtendTimeout(3 * step)
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				continue // the configuration is read once we are up
			}
			d.log.Info("stopping", "signal", unix.SignalName(sig.(syscall.Signal)), journal.MessageStopping.Attr())
			return d.stop(), true
		}
	}
}

// serve starts the HTTP front on every listener.
func (d *daemon) serve() error {
	g := d.cfg.Gateway
	handler := front.New(d.gw, front.Options{
		Endpoint:              g.Endpoint,
		MaxMessageBytes:       g.MaxMessageBytes,
		AllowedOrigins:        g.AllowedOrigins,
		AllowedHosts:          g.AllowedHosts,
		ResumeWindow:          g.ResumeWindow,
		KeepAlive:             g.SSEKeepAliveInterval,
		MaxConcurrentRequests: g.MaxConcurrentRequests,
		MaxBatchSize:          g.MaxBatchSize,
		Logger:                d.log,
		Clients:               d.clients.Load,
		Refusals:              d.refusals,
		Health:                d.health,
		Telemetry:             d.tel,
		ServerCard:            g.ServerCard,
		Version:               Version,
	})
	d.warnAccess()
	// The front's server is http1's, not net/http's: the same parser and
	// handler types with less work per request (see package http1).
	// ReadTimeout bounds reading headers and body; nothing waits on it
	// once the body is read, so event streams outlast it
	// (TestEventStreamOutlivesReadTimeout). No write timeout: it would cut
	// them.
	d.srv = &http1.Server{
		Handler:     handler,
		ConnContext: access.ConnContext, // peer credentials of unix socket clients
		ReadTimeout: g.HTTPReadTimeout,
		IdleTimeout: g.HTTPIdleTimeout,
		ErrorLog:    slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	for _, l := range d.lns.Listeners {
		go func() {
			if err := d.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("HTTP listener failed", "listener", l.Name, "err", err)
			}
		}()
	}
	return nil
}

// loop is the main loop: signals, reloads and liveness probes.
func (d *daemon) loop(ctx context.Context, sigs <-chan os.Signal) int {
	wedge := d.testHooks(ctx)
	idle, stopIdle := d.idleExit(ctx)
	defer stopIdle()
	for {
		select {
		case <-idle:
			d.log.Info(fmt.Sprintf("exiting: no client session and no backend process for %s (idle_exit); socket activation starts mcpgated again for the next client", d.cfg.Gateway.IdleExit),
				journal.MessageStopping.Attr())
			return d.stop()
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if code, reexeced := d.reloadOrReexec(ctx, nil); reexeced {
					return code
				}
				continue
			}
			d.log.Info("stopping", "signal", unix.SignalName(sig.(syscall.Signal)), journal.MessageStopping.Attr())
			return d.stop()
		case done := <-d.reloads:
			if code, reexeced := d.reloadOrReexec(ctx, done); reexeced {
				return code
			}
		case reply := <-d.ping:
			close(reply)
		case <-wedge:
			d.log.Warn("test fault: the main loop is wedged")
			select {} // deliberately never returns: the watchdog must notice
		}
	}
}

// Reload asks the main loop to re-read the configuration and returns once
// it is applied, or the error that kept it from being applied.
func (d *daemon) Reload(ctx context.Context) error {
	done := make(chan error, 1)
	select {
	case d.reloads <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reload re-reads the configuration. An invalid one changes nothing.
func (d *daemon) reload(ctx context.Context) (err error) {
	d.notify.Reloading()
	defer func() {
		if err != nil {
			d.log.Error("reload failed; the previous configuration stays in effect", "err", err, journal.MessageReloadFailed.Attr())
			line := "reload failed: " + strings.ReplaceAll(err.Error(), "\n", "; ") + "; running the previous configuration"
			d.status.Set(line)
			runHooks(d.onStatus, line)
		} else {
			d.updateStatus()
		}
		d.notify.Ready()
	}()
	cfg, err := config.Load(d.opts.configPath)
	if err != nil {
		return err
	}
	if err := d.checkReloadCgroups(cfg); err != nil {
		return err
	}
	if !reflect.DeepEqual(cfg.Gateway, d.cfg.Gateway) {
		d.log.Warn("changes to the [gateway] section take effect when mcpgated restarts; backends are reloaded now")
	}
	d.warnTelemetryReload(cfg)
	// The new clients, policies and composites take effect before any new
	// backend starts, and once the removed and changed ones left the
	// catalog: a new backend's tools are never listed under the old
	// policies, and a removed client or token is refused from here on.
	next := *d.cfg
	next.Backends, next.Clients, next.Composites, next.Files = cfg.Backends, cfg.Clients, cfg.Composites, cfg.Files
	next.Profiles = cfg.Profiles
	change, err := d.apply(ctx, &next, func() {
		d.integrity.Configure(&next)
		d.gw.Refresh()
		d.gw.SetClients(d.loadClients(&next))
		d.gw.Configure(&next)
	})
	summary := change.String()
	if clients := clientChange(d.cfg.Clients, cfg.Clients); clients != "" {
		summary += "; " + clients
	}
	if profiles := profileChange(d.cfg.Profiles, cfg.Profiles); profiles != "" {
		summary += "; " + profiles
	}
	d.cfg.Backends = cfg.Backends
	d.cfg.Clients = cfg.Clients
	d.cfg.Composites = cfg.Composites
	d.cfg.Profiles = cfg.Profiles
	d.cfg.Files = cfg.Files
	d.resetUnusedUnits(ctx)
	d.gw.Refresh()
	d.log.Info("configuration reloaded: "+summary, journal.MessageReload.Attr())
	d.warnUnmatchedOnceSettled(ctx, change)
	return err
}

// apply applies cfg to the backends, which waits for the removed and
// changed ones to stop (each within its grace periods), not for the new
// ones' handshakes, and answers the watchdog's liveness probes meanwhile:
// the main loop is not wedged, and a slow stop is no reason for systemd to
// kill the daemon. restrict switches the clients and policies; see
// supervisor.Apply for when it runs.
func (d *daemon) apply(ctx context.Context, cfg *config.Config, restrict func()) (supervisor.Change, error) {
	type result struct {
		change supervisor.Change
		err    error
	}
	done := make(chan result, 1)
	go func() {
		change, err := d.sup.Apply(ctx, cfg, restrict)
		done <- result{change, err}
	}()
	for {
		select {
		case r := <-done:
			return r.change, r.err
		case reply := <-d.ping:
			close(reply)
		}
	}
}

// stop drains the requests in flight, closes the front and stops every
// backend.
func (d *daemon) stop() int {
	// The main loop answers no liveness probe from here on, and systemd
	// does not watch a stopping service: a failed check would only be a
	// misleading log line.
	if d.stopWatchdog != nil {
		d.stopWatchdog()
	}
	if d.cancelUnmatched != nil {
		d.cancelUnmatched() // the catalog empties from here on
	}
	// New calls are refused before anyone hears STOPPING=1.
	d.gw.StopAccepting()
	d.notify.Stopping()
	g := d.cfg.Gateway
	d.finalStatus("stopping: finishing requests in flight")
	drainCtx, cancel := context.WithTimeout(context.Background(), g.DrainTimeout)
	if err := d.gw.Drain(drainCtx); err != nil {
		d.log.Warn("drain timeout reached; cancelling the requests still in flight", "drain_timeout", g.DrainTimeout)
		d.gw.CutOff(fmt.Sprintf("the gateway is shutting down and the request did not finish within drain_timeout (%s)", g.DrainTimeout))
	}
	cancel()
	d.gw.Close()
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	d.srv.Shutdown(closeCtx)
	cancel()
	d.srv.Close()
	d.finalStatus("stopping: shutting backends down")
	d.shutdownBackends()
	d.log.Info("mcpgate stopped")
	return exitOK
}

func (d *daemon) shutdownBackends() {
	d.sup.Shutdown()
}

func (d *daemon) fail(err error) int {
	d.log.Error(err.Error())
	d.finalStatus("failed: " + err.Error())
	return exitFailed
}

// finalStatus sends STATUS=line as the daemon's last word: it first stops
// the updates that backend changes cause (sending the one pending), so that
// a shutdown's "0/2 backends healthy" cannot overtake line.
func (d *daemon) finalStatus(line string) {
	if d.stopStatus != nil {
		d.stopStatus()
		d.stopStatus = nil
	}
	d.notify.Status(line)
}

// alive is the watchdog's liveness check: the main loop and the HTTP front
// must both answer.
func (d *daemon) alive(ctx context.Context) error {
	reply := make(chan struct{})
	select {
	case d.ping <- reply:
	case <-ctx.Done():
		return errors.New("the main loop does not answer")
	}
	<-reply
	if len(d.lns.Listeners) == 0 {
		return nil
	}
	addr := d.lns.Listeners[0].Addr()
	client := http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, addr.Network(), addr.String())
		},
		DisableKeepAlives: true,
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodOptions, "http://localhost"+d.cfg.Gateway.Endpoint, nil)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("the HTTP front does not answer: %w", err)
	}
	resp.Body.Close()
	return nil
}

// updateStatus tells systemd the one-line status.
func (d *daemon) updateStatus() {
	if d.status == nil || d.sup == nil {
		return
	}
	line := d.statusLine()
	d.status.Set(line)
	runHooks(d.onStatus, line)
}

func (d *daemon) statusLine() string {
	return supervisor.StatusLine(d.sup.Backends(), len(d.gw.Catalog().Tools))
}

func runHooks[T any](hooks []func(T), v T) {
	for _, h := range hooks {
		h(v)
	}
}

// backendOptions gives each backend its stderr sink and the shared settings.
func (d *daemon) backendOptions(cfg *config.Backend) backend.Options {
	opts := d.instanceOptions(cfg, 0)
	d.lifecycleOptions(cfg, &opts)
	opts.Adopt = d.takeAdopted(cfg)
	return opts
}

// instanceOptions gives a backend, or instance n of a pool, its stderr sink
// and the shared settings.
func (d *daemon) instanceOptions(cfg *config.Backend, n int) backend.Options {
	opts := backend.Options{
		Instance:        n,
		Spawn:           d.spawn(),
		Version:         Version,
		GracePeriod:     d.cfg.Gateway.ShutdownGracePeriod,
		MaxMessageBytes: d.cfg.Gateway.MaxMessageBytes,
		Env:             os.Environ(),
		// Read each time a child starts, so rotated credentials apply at
		// the next restart.
		CredentialsDirectory: d.credentialsDirectory(),
		Handler:              d.gw,
		Logger:               d.log,
		OnChange: func(b *backend.Backend) {
			d.gw.Refresh()
			d.updateStatus()
			runHooks(d.onChange, b)
		},
		OnCalls:   func(b *backend.Backend) { runHooks(d.onCalls, b) },
		OnCall:    d.metrics.observe,
		Telemetry: d.tel,
	}
	if len(cfg.RequiresUnits) > 0 {
		opts.Units = d.units
	}
	if cfg.UnitRunner() {
		opts.UnitRunner = d.runner
	} else {
		opts.Cgroups = d.cgroups
	}
	if d.output.Writer != nil {
		sink := journal.NewBackendLog(d.output.Writer, journal.BackendLogOptions{
			Backend:   cfg.Name,
			Instance:  instanceLabel(n),
			RateLimit: journal.RateLimit{Burst: cfg.LogRateLimit.Burst, Interval: cfg.LogRateLimit.Interval},
			ErrorLog:  d.log,
		})
		opts.Stderr = pidSink{sink}
		if cfg.Prerequisite != nil {
			opts.PrerequisiteStderr = d.prerequisiteSink(cfg)
		}
		// MCP log messages share the sink and its rate limit; the sink is
		// closed when the backend is gone.
		d.sinksMu.Lock()
		d.sinks[sinkKey{cfg, n}] = sink
		d.sinksMu.Unlock()
	}
	return opts
}

// pidSink adapts a journal BackendLog to backend.LineSink.
type pidSink struct{ l *journal.BackendLog }

func (p pidSink) Line(pid int, line []byte, partial bool) {
	p.l.SetPID(pid)
	p.l.Line(line, partial)
}

// releaseSink closes the journal sink of a backend that stopped for good.
func (d *daemon) releaseSink(b *backend.Backend) {
	d.releaseInstanceSink(b.Config(), b.Instance())
}

// releaseInstanceSink closes the journal sink of a backend or instance.
func (d *daemon) releaseInstanceSink(cfg *config.Backend, n int) {
	d.sinksMu.Lock()
	sink := d.sinks[sinkKey{cfg, n}]
	delete(d.sinks, sinkKey{cfg, n})
	prereq := d.prereqSinks[cfg]
	delete(d.prereqSinks, cfg)
	d.sinksMu.Unlock()
	if sink != nil {
		sink.Close()
	}
	if prereq != nil {
		prereq.Close()
	}
}

// mcpLog writes a backend's notifications/message to the journal, or to
// the daemon's log when not running under the journal.
func (d *daemon) mcpLog(b *backend.Backend, params []byte) {
	name := b.Name()
	d.sinksMu.Lock()
	sink := d.sinks[sinkKey{b.Config(), b.Instance()}]
	d.sinksMu.Unlock()
	if sink != nil {
		// The sink learns the pid from stderr lines; a child that never
		// wrote one still gets its MCPGATE_BACKEND_PID.
		if pid := b.Status().PID; pid > 0 {
			sink.SetPID(pid)
		}
		sink.MCPMessage(params)
		return
	}
	m, err := journal.ParseMCPLog(params)
	if err != nil {
		// A body that is not a log message may carry anything: only at
		// debug level, and only its start.
		d.log.Debug("malformed log message from backend", "backend", name, "message", excerpt(params))
		return
	}
	attrs := []slog.Attr{slog.String("backend", name), slog.String("mcp_level", m.Level)}
	if m.Logger != "" {
		attrs = append(attrs, slog.String("logger", m.Logger))
	}
	if n := b.Instance(); n > 0 {
		attrs = append(attrs, slog.Int("instance", n))
	}
	d.log.LogAttrs(context.Background(), m.SlogLevel, m.Message, attrs...)
}

func listenerNames(set *listeners.Set) []string {
	var names []string
	for _, l := range set.Listeners {
		names = append(names, l.Name)
	}
	return names
}

func logLevel(name string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err != nil {
		return slog.LevelInfo
	}
	return l
}
