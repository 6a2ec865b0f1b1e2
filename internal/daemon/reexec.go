package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/handoff"
	"github.com/mcpgate/mcpgate/internal/journal"
)

// envListeners names, to the re-executed mcpgated, its listening sockets:
// "FD:NAME,…" in order, NAME "http" or "metrics" as FileDescriptorName=.
const envListeners = "MCPGATE_HANDOFF_LISTENERS"

// image is the binary this process runs: the path it was started from and
// the file it was then. A reload that finds another file at the path
// re-executes it.
type image struct {
	path     string
	dev, ino uint64
}

// currentImage returns what runs now; its zero value when unknown.
func currentImage() image {
	path, err := os.Executable() // the running file's path, without " (deleted)"
	if err != nil {
		return image{}
	}
	var st unix.Stat_t
	if unix.Stat("/proc/self/exe", &st) != nil {
		return image{}
	}
	return image{path: path, dev: st.Dev, ino: st.Ino}
}

// replaced reports whether the file at the image's path is another one
// now: a package upgrade installed a new binary.
func (im image) replaced() bool {
	var st unix.Stat_t
	if im.path == "" || unix.Stat(im.path, &st) != nil {
		return false
	}
	return st.Dev != im.dev || st.Ino != im.ino
}

// reloadOrReexec reloads the configuration, or, when a new binary is
// installed where mcpgated was started from, re-executes it in place
// (see reexec), which reads the configuration anew. done, if not nil, is
// answered with the reload's outcome, or before the re-exec begins. It
// reports whether it re-executed, which returns only on failure, with
// the daemon's exit code.
func (d *daemon) reloadOrReexec(ctx context.Context, done chan<- error) (int, bool) {
	if d.image.replaced() {
		key, boot, err := d.reexecPreflight(ctx)
		if err == nil {
			// STATUS= before the answer: systemd reads it before it sees
			// the reload's ExecReload= end, so that whoever reloaded
			// knows to wait for the new image (the package's postinst).
			d.finalStatus("re-executing " + d.image.path)
			if done != nil {
				done <- nil
			}
			return d.reexec(ctx, key, boot), true
		}
		d.log.Warn(fmt.Sprintf("a new %s is installed, but mcpgated cannot re-execute it: %v; reloading the configuration instead (systemctl restart mcpgate starts the new binary)", d.image.path, err), "err", err)
	}
	err := d.reload(ctx)
	if done != nil {
		done <- err
	}
	return 0, false
}

// reexecPreflight checks what a re-exec needs before anything is handed
// on: the new binary runs, the key and the boot id are there. An error
// keeps this process going with a plain reload.
func (d *daemon) reexecPreflight(ctx context.Context) (key []byte, boot string, err error) {
	if d.spawner == nil {
		return nil, "", errors.New("mcpgated was not started by its main function")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, d.image.path, "--version").CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("the new %s does not run (%v): %s", d.image.path, err, strings.TrimSpace(string(out)))
	}
	// The new image reads the configuration as it starts: one that does
	// not load would leave no daemon at all.
	if _, err := config.Load(d.opts.configPath); err != nil {
		return nil, "", fmt.Errorf("the configuration does not load: %w", err)
	}
	if key, err = handoff.LoadKey(stateDirectory(d.cfg.Gateway)); err != nil {
		return nil, "", err
	}
	if boot, err = handoff.BootID(); err != nil {
		return nil, "", err
	}
	return key, boot, nil
}

// reexec re-executes the new binary in place: the same PID, so systemd
// sees a reload (RELOADING=1, then the new image's READY=1), the
// listening sockets kept (new connections wait in their backlog), the
// calls in flight finished (up to drain_timeout), and the running stdio
// backends handed on (see backend.Detach) with a record the new image
// authenticates; the others are stopped and started again by the new
// image. It returns only if the re-exec failed; then the backends are
// gone or half handed on, and the daemon must exit so that systemd starts
// it clean.
func (d *daemon) reexec(ctx context.Context, key []byte, boot string) int {
	// The main loop answers no liveness probe meanwhile: the watchdog is
	// petted here until the new image takes over.
	if d.stopWatchdog != nil {
		d.stopWatchdog()
	}
	petCtx, stopPets := context.WithCancel(ctx)
	defer stopPets()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				d.notify.Watchdog()
			case <-petCtx.Done():
				return
			}
		}
	}()
	d.notify.Reloading()
	d.log.Info(fmt.Sprintf("re-executing %s in place: the backends that can be are handed on without a restart", d.image.path),
		"binary", d.image.path, journal.MessageReexec.Attr())
	lns, names, err := d.listenerFiles()
	if err != nil {
		return d.fail(fmt.Errorf("re-exec: %w", err))
	}

	// No new connection from here on (they wait in the listen backlog for
	// the new image); those open finish their request, each answer written
	// in full; the event streams (GET) end with the connections, as after
	// a network blip.
	g := d.cfg.Gateway
	drainCtx, cancel := context.WithTimeout(context.Background(), g.DrainTimeout)
	streaming := func(r *http.Request) bool { return r.Method == http.MethodGet }
	if err := d.srv.Handover(drainCtx, streaming); err != nil {
		d.gw.CutOff(fmt.Sprintf("mcpgated re-executes and the request did not finish within drain_timeout (%s)", g.DrainTimeout))
		// What CutOff answered is written before the connections close.
		cutCtx, cancelCut := context.WithTimeout(context.Background(), time.Second)
		d.srv.Handover(cutCtx, streaming)
		cancelCut()
	}
	cancel()
	d.srv.Close()

	rec := &handoff.Record{BootID: boot, PID: os.Getpid(), Version: Version}
	// No request is in flight now: the sessions are as they will be.
	if rec.Sessions, err = json.Marshal(d.gw.SessionStates()); err != nil {
		return d.fail(fmt.Errorf("re-exec: the sessions: %w", err))
	}
	keep := lns
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range d.sup.Backends() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			det, err := b.Detach(ctx)
			if err == nil {
				mu.Lock()
				rec.Backends = append(rec.Backends, det.Record)
				keep = append(keep, det.Files...)
				mu.Unlock()
				return
			}
			if b.State() != backend.Stopped && b.State() != backend.Idle {
				d.log.Info(fmt.Sprintf("backend %q is started again after the re-exec: %v", b.Name(), err), "backend", b.Name())
			}
			b.Stop(ctx)
		}()
	}
	wg.Wait()
	sealed, err := handoff.Seal(rec, key)
	if err != nil {
		return d.fail(fmt.Errorf("re-exec: %w", err))
	}
	memfd, err := handoff.WriteMemfd(sealed)
	if err != nil {
		return d.fail(fmt.Errorf("re-exec: %w", err))
	}
	keep = append(keep, memfd)
	// The name is free before the new image asks for it: closing the
	// connection alone would leave the bus to notice it meanwhile.
	d.stopBus()
	d.stopTelemetry() // what is queued reaches the collector before the exec
	memfdNum := -1
	withFD(memfd, func(u uintptr) error { memfdNum = int(u); return nil })
	env := append(handoffEnv(d.opts.environ), handoff.EnvFD+"="+strconv.Itoa(memfdNum), envListeners+"="+names)
	err = d.spawner.exec(d.image.path, d.opts.args, env, keep)
	return d.fail(fmt.Errorf("re-exec of %s failed: %w; exiting, so that systemd starts mcpgated afresh", d.image.path, err))
}

// listenerFiles duplicates the listening sockets for the new image, and
// returns their names for envListeners.
func (d *daemon) listenerFiles() ([]*os.File, string, error) {
	type filer interface{ File() (*os.File, error) }
	var files []*os.File
	var names []string
	add := func(l net.Listener, name string) error {
		fl, ok := l.(filer)
		if !ok {
			return fmt.Errorf("listener %s cannot be handed on", l.Addr())
		}
		f, err := fl.File() // a duplicate, close-on-exec until the exec
		if err != nil {
			return err
		}
		files = append(files, f)
		fd := -1
		withFD(f, func(u uintptr) error { fd = int(u); return nil })
		names = append(names, strconv.Itoa(fd)+":"+name)
		return nil
	}
	for _, l := range d.lns.Listeners {
		if err := add(l.Listener, "http"); err != nil {
			return nil, "", err
		}
	}
	if m := d.lns.Metrics; m != nil {
		if err := add(m.Listener, "metrics"); err != nil {
			return nil, "", err
		}
	}
	return files, strings.Join(names, ","), nil
}

// handoffEnv is the environment mcpgated started with, for the new image:
// without the sockets systemd passed (the record names them now) and
// without a previous handoff's variables.
func handoffEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", handoff.EnvFD, envListeners:
			continue
		}
		env = append(env, kv)
	}
	return env
}
