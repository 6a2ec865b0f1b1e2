package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/bench/internal/gateways"
	"github.com/mcpgate/mcpgate/bench/internal/proc"
	"github.com/mcpgate/mcpgate/bench/internal/report"
)

// startupScenario starts mcpgated with many backends under
// systemd-socket-activate, as mcpgate.socket would, and times the first
// connection to READY=1 against the slowest backend handshake.
func (b *bencher) startupScenario() error {
	if _, err := exec.LookPath("systemd-socket-activate"); err != nil {
		b.r.Notes = append(b.r.Notes, "start-up not measured: systemd-socket-activate is not installed")
		return nil
	}
	for _, n := range b.plan.startup {
		b.r.Startup = append(b.r.Startup, b.startup(n))
	}
	return nil
}

func (b *bencher) startup(n int) report.StartupRun {
	sr := report.StartupRun{Backends: n, Repeats: b.plan.startupRepeats}
	fmt.Fprintf(os.Stderr, "  startup  mcpgate      %d backends\n", n)
	var ready, shake []float64
	var rss []int64
	for range b.plan.startupRepeats {
		h, err := slowestHandshake(b.ctx, b.echo(), n)
		if err != nil {
			sr.Error = err.Error()
			return sr
		}
		r, m, err := b.startOnce(n)
		if err != nil {
			sr.Error = err.Error()
			return sr
		}
		shake, ready, rss = append(shake, ms(h)), append(ready, ms(r)), append(rss, m)
	}
	sr.ReadyMs, sr.HandshakeMs, sr.RSSKiB = median(ready), median(shake), slices.Max(rss)
	sr.OverMs = sr.ReadyMs - sr.HandshakeMs
	return sr
}

// startOnce runs mcpgated with n echo backends under
// systemd-socket-activate, connects, and returns the time from the
// connection to READY=1 and the daemon's RSS (KiB) then.
func (b *bencher) startOnce(n int) (time.Duration, int64, error) {
	port, err := gateways.FreePort()
	if err != nil {
		return 0, 0, err
	}
	dir, err := os.MkdirTemp(b.env.Work, "startup-")
	if err != nil {
		return 0, 0, err
	}
	cfg := filepath.Join(dir, "mcpgate.toml")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := os.WriteFile(cfg, []byte(gateways.MCPGateConfig(addr, n, b.echo())), 0o644); err != nil {
		return 0, 0, err
	}
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		return 0, 0, err
	}
	defer notify.Close()
	out := &watch{want: "Listening on", seen: make(chan struct{})}
	p, err := b.group.Start("mcpgated", []string{"systemd-socket-activate", "-l", addr, "--fdname=http",
		"-E", "NOTIFY_SOCKET=" + notify.LocalAddr().String(),
		filepath.Join(b.env.Bin, "mcpgated"), "--config", cfg}, nil, out)
	if err != nil {
		return 0, 0, err
	}
	defer b.group.Stop(p)
	select {
	case <-out.seen:
	case <-time.After(10 * time.Second):
		return 0, 0, fmt.Errorf("systemd-socket-activate did not listen: %s", out.String())
	}
	t0 := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	notify.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 4096)
	for {
		k, err := notify.Read(buf)
		if err != nil {
			return 0, 0, fmt.Errorf("waiting for READY=1: %w; output: %s", err, out.String())
		}
		if slices.Contains(strings.Split(string(buf[:k]), "\n"), "READY=1") {
			break
		}
	}
	took := time.Since(t0)
	m, err := proc.Mem(p.PID)
	return took, m.RSS, err
}

// slowestHandshake spawns n backends at once and returns the longest time
// from spawning one to its answer to initialize: what no gateway starting
// n backends can beat.
func slowestHandshake(ctx context.Context, argv []string, n int) (time.Duration, error) {
	times := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			times[i], errs[i] = handshake(ctx, argv)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return slices.Max(times), nil
}

func handshake(ctx context.Context, argv []string) (time.Duration, error) {
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpbench","version":"1"}}}`+"\n")
	if _, err := bufio.NewReader(stdout).ReadBytes('\n'); err != nil {
		return 0, fmt.Errorf("handshake with %s: %w", argv[0], err)
	}
	return time.Since(t0), nil
}

// watch is an output sink that signals when want first appears.
type watch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	done bool
}

func (w *watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
