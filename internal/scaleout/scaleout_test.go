// Package scaleout proves the multi-host deployment of mcpgated(8),
// RUNNING SEVERAL HOSTS: several mcpgated, each in a network namespace of
// its own, behind HAProxy configured from packaging/examples/haproxy.cfg.
package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const (
	nHosts    = 3
	nSessions = 50
	nCalls    = 10000 // in all, nCalls/nSessions per session
	port      = "8080"
	wait      = 60 * time.Second
)

// host is one mcpgated in its namespace, named by its UTS host name.
type host struct {
	name, addr string
	d          *testutil.Daemon
}

// startHosts runs one mcpgated per namespace of l, each in a UTS namespace
// of its own named h1, h2, …, with the fake server and a real npm server.
func startHosts(t testing.TB, l *lab) []*host {
	// One after the other: StartDaemon may end the test, which only the
	// test's goroutine may do.
	hosts := make([]*host, len(l.hosts))
	for i := range l.hosts {
		hosts[i] = startHost(t, l, i)
	}
	return hosts
}

// startHost runs mcpgated in the namespace of host i, with the fake
// server and a real npm server, and no authentication.
func startHost(t testing.TB, l *lab, i int) *host {
	npm := testutil.NpmServer(t, "mcp-server-everything")
	return startHostWith(t, l, i, "none", fmt.Sprintf("[backends.everything]\ncommand = %q\nargs = [\"stdio\"]\n", npm))
}

// startHostWith runs mcpgated in the namespace of host i with auth, the
// fake server, and the configuration extra.
func startHostWith(t testing.TB, l *lab, i int, auth, extra string) *host {
	bins := testutil.BuildWithoutRace(t)
	h := &host{name: fmt.Sprintf("h%d", i+1), addr: hostAddr(i)}
	toml := fmt.Sprintf(`[gateway]
listen = ["%[1]s:%[2]s"]
metrics_listen = "%[1]s:9090"
allowed_hosts = [%[3]q, %[1]q]
bus = "none"
auth = %[5]q
log_target = "stderr"
log_level = "info"
drain_timeout = "60s"

[backends.fake]
command = %[4]q

`, h.addr, port, lbAddr, bins.Fake, auth) + extra
	wrap := []string{"ip", "netns", "exec", l.hosts[i], "unshare", "--uts", "/bin/sh", "-c", `hostname "$0" && exec "$@"`, h.name}
	h.d = testutil.StartDaemon(t, toml, "http://"+h.addr+":"+port+"/mcp", testutil.DaemonOptions{Wrap: wrap, WithoutRace: true})
	return h
}

// startHAProxy runs Debian's haproxy in the balancer's namespace with the
// shipped example, only its addresses changed to the lab's.
func startHAProxy(t testing.TB, l *lab) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		testutil.Unavailable(t, "haproxy is not installed (packaging/ci/deps.sh installs Debian's): %v", err)
	}
	example, err := os.ReadFile("../../packaging/examples/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(example), "192.0.2.10:", lbAddr+":")
	for i := range nHosts {
		cfg = strings.ReplaceAll(cfg, fmt.Sprintf("192.0.2.%d:", 11+i), hostAddr(i)+":")
	}
	if strings.Contains(cfg, "192.0.2.") {
		t.Fatalf("the example has addresses the test does not know how to change:\n%s", cfg)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out testutil.Buffer
	cmd := exec.Command("ip", "netns", "exec", l.lb, bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out.String())
		}
	})
	dial := dialIn(t, l.lb)
	testutil.Eventually(t, wait, "haproxy listening", func() bool {
		c, err := dial(t.Context(), "tcp", lbAddr+":"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// failure is a call that got no result, and the session it was in.
type failure struct {
	owner string
	out   outcome
}

// load runs the sessions' calls; every session calls fake__hostname and
// checks that the host that created it answers.
type load struct {
	hc  *http.Client
	url string

	mu       sync.Mutex
	byHost   map[string]int // results per answering host
	failures []failure
	wrongs   []string // calls answered by a host that does not own the session
	inits    map[string]int

	done    atomic.Int64 // results in all
	mark    int64        // closes reached when done gets there
	reached chan struct{}
}

func (ld *load) record(host string) {
	ld.mu.Lock()
	ld.byHost[host]++
	ld.mu.Unlock()
	if ld.done.Add(1) == ld.mark {
		close(ld.reached)
	}
}

// after returns a channel closed once n more results came; call it only
// between phases.
func (ld *load) after(n int64) <-chan struct{} {
	ld.mark, ld.reached = ld.done.Load()+n, make(chan struct{})
	return ld.reached
}

// run makes calls results in session s, initializing it again whenever a
// call fails; it returns how many requests failed in a row at most.
func (ld *load) run(t *testing.T, s *session, calls int) {
	ctx := t.Context()
	for got := 0; got < calls; {
		if s.id == "" {
			if out := s.initialize(ctx); s.id == "" {
				if out.status == http.StatusServiceUnavailable || out.err != nil {
					continue // a draining or dead host: the balancer moves on
				}
				t.Errorf("initialize: %s", out)
				return
			}
		}
		text, out := s.call(ctx, "fake__hostname", "{}")
		if text == "" {
			ld.mu.Lock()
			ld.failures = append(ld.failures, failure{s.owner, out})
			ld.mu.Unlock()
			s.id = "" // initialize again: the session is gone
			continue
		}
		if s.owner == "" {
			s.owner = text
			ld.mu.Lock()
			ld.inits[text]++
			ld.mu.Unlock()
		} else if text != s.owner {
			ld.mu.Lock()
			ld.wrongs = append(ld.wrongs, fmt.Sprintf("session %s of %s answered by %s", s.id, s.owner, text))
			ld.mu.Unlock()
		}
		ld.record(text)
		got++
	}
}

// take returns the failures so far and forgets them.
func (ld *load) take() []failure {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	f := ld.failures
	ld.failures = nil
	return f
}

func TestScaleOutBehindHAProxy(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces need root")
	}
	l := newLab(t, nHosts)
	hosts := startHosts(t, l)
	startHAProxy(t, l)
	dial := dialIn(t, l.lb)
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: nSessions * 2}, Timeout: wait}
	t.Cleanup(hc.CloseIdleConnections)
	ld := &load{hc: hc, url: "http://" + lbAddr + ":" + port + "/mcp", byHost: map[string]int{}, inits: map[string]int{}}

	// Phase 1: all hosts up. Every session sticks to its host, and the
	// round-robin initializes spread the sessions, so the calls, evenly.
	sessions := make([]*session, nSessions)
	per := nCalls / nSessions
	phase := func(calls int) (done chan struct{}) {
		done = make(chan struct{})
		var wg sync.WaitGroup
		for i := range sessions {
			if sessions[i] == nil {
				sessions[i] = &session{hc: hc, url: ld.url}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ld.run(t, sessions[i], calls)
			}()
		}
		go func() { wg.Wait(); close(done) }()
		return done
	}
	<-phase(per / 2)
	if f := ld.take(); len(f) > 0 {
		t.Fatalf("with every host up, %d calls failed, first: %s", len(f), f[0].out)
	}
	even := float64(nCalls/2) / nHosts
	for _, h := range hosts {
		if n := float64(ld.byHost[h.name]); n < 0.8*even || n > 1.2*even {
			t.Errorf("host %s answered %v of %d calls; want within 20%% of %v (sessions per host: %v)", h.name, n, nCalls/2, even, ld.inits)
		}
	}
	t.Logf("phase 1: calls per host %v, sessions per host %v", ld.byHost, ld.inits)
	checkHostLabel(t, dial, hosts[0])

	// Phase 2: h2 stops gracefully during the load. A slow call on one of
	// its sessions is in flight when SIGTERM comes: /healthz fails while it
	// runs, it is answered, h2's sessions get 404 and initialize again on
	// another host, and the other hosts' sessions see no error.
	stopping := hosts[1]
	slow := &session{hc: hc, url: ld.url}
	for slow.owner != stopping.name {
		if out := slow.initialize(t.Context()); slow.id == "" {
			t.Fatalf("initialize: %s", out)
		}
		if slow.owner, _ = slow.call(t.Context(), "fake__hostname", "{}"); slow.owner == "" {
			t.Fatal("the slow session's first call failed")
		}
	}
	type answer struct {
		text string
		out  outcome
	}
	slowDone := make(chan answer, 1)
	var slowFinished atomic.Bool
	go func() {
		text, out := slow.call(t.Context(), "fake__slow", `{"ms":3000}`)
		slowFinished.Store(true)
		slowDone <- answer{text, out}
	}()
	testutil.Eventually(t, wait, "the slow call in flight on "+stopping.name, func() bool {
		return metric(t, dial, stopping, `mcpgate_calls_in_flight{backend="fake",host="h2"}`) == "1"
	})
	reached := ld.after(nCalls / 10)
	done := phase(per / 4)
	awaitMark(t, reached, done)
	stopping.d.Signal(syscall.SIGTERM)
	for {
		code, body := healthz(t, dial, stopping)
		if code == http.StatusServiceUnavailable {
			if body != "draining\n" || slowFinished.Load() {
				t.Errorf("/healthz of the stopping host: %q, with the call in flight answered: %v; want \"draining\" while it runs", body, slowFinished.Load())
			}
			break
		}
		if code != http.StatusOK {
			t.Fatalf("/healthz of the stopping host: %d %q before it answered 503", code, body)
		}
	}
	<-done
	if a := <-slowDone; !strings.Contains(a.text, "slept 3000 ms") {
		t.Errorf("the call in flight on the stopping host: %q %s; want its answer", a.text, a.out)
	}
	if code := stopping.d.AwaitExit(t, wait); code != 0 {
		t.Errorf("the stopped host exited with %d", code)
	}
	failed := ld.take()
	t.Logf("phase 2: %d calls of sessions on %s failed and their clients initialized again: %v", len(failed), stopping.name, statuses(failed))
	for _, f := range failed {
		if f.owner != stopping.name {
			t.Errorf("a call of a session on %s failed while %s stopped: %s", f.owner, stopping.name, f.out)
		} else if f.out.status != http.StatusNotFound || !strings.Contains(f.out.body, "not found") {
			t.Errorf("a call of a session on the stopping host: %s; want 404 session not found", f.out)
		}
	}

	// Phase 3: h3 is killed during the load. Its sessions' next calls fail
	// with an error that says so and recover by initializing again; h1's
	// sessions see no error.
	killed := hosts[2]
	reached = ld.after(nCalls / 10)
	done = phase(per / 4)
	awaitMark(t, reached, done)
	killed.d.Kill(t)
	<-done
	failed = ld.take()
	t.Logf("phase 3: %d calls of sessions on %s failed and their clients initialized again: %v", len(failed), killed.name, statuses(failed))
	for _, f := range failed {
		switch {
		case f.owner != killed.name:
			t.Errorf("a call of a session on %s failed after %s was killed: %s", f.owner, killed.name, f.out)
		case f.out.err != nil:
			// A call in flight when the host died: HAProxy closes a reused
			// client connection without an answer when the server closed
			// it before sending anything (haproxy/haproxy#3414); Go reports
			// io.EOF. Whether the call ran is unknown to the client, as
			// with any host that dies; it is not answered twice.
			if !errors.Is(f.out.err, io.EOF) {
				t.Errorf("a call of a session on the killed host: %v; want 404, or the connection closed without an answer", f.out.err)
			}
		case f.out.status != http.StatusNotFound || !strings.Contains(f.out.body, "not found"):
			t.Errorf("a call of a session on the killed host: %s; want 404 session not found", f.out)
		}
	}

	// No call lost, none answered twice, none by the wrong host.
	total := 0
	for _, n := range ld.byHost {
		total += n
	}
	if total != nCalls || ld.done.Load() != nCalls {
		t.Errorf("%d results (%v); want exactly %d", total, ld.byHost, nCalls)
	}
	for _, w := range ld.wrongs {
		t.Error(w)
	}
	// A host never accepts an id it did not mint: neither another host
	// nor the stopped host once restarted knows a session of its last run.
	restarted := startHost(t, l, 1)
	for _, h := range []*host{hosts[0], restarted} {
		old := &session{hc: hc, url: "http://" + h.addr + ":" + port + "/mcp", id: slow.id}
		if _, out := old.call(t.Context(), "fake__hostname", "{}"); out.status != http.StatusNotFound {
			t.Errorf("a session id of %s's last run sent to %s: %s; want 404", stopping.name, h.name, out)
		}
	}
	t.Logf("calls per host %v, sessions per host %v", ld.byHost, ld.inits)
}

// healthz asks h's /healthz directly, with no credentials.
func healthz(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), h *host) (int, string) {
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: wait}
	resp, err := hc.Get("http://" + h.addr + ":" + port + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of the series named by line (name{labels}) on
// h's /metrics, or "".
func metric(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), h *host, series string) string {
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: wait}
	resp, err := hc.Get("http://" + h.addr + ":9090/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", h.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	return ""
}

// checkHostLabel checks that h's metrics carry its host name.
func checkHostLabel(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), h *host) {
	if v := metric(t, dial, h, fmt.Sprintf(`mcpgate_sessions{host=%q}`, h.name)); v == "" {
		t.Errorf("%s's metrics have no mcpgate_sessions{host=%q}", h.name, h.name)
	}
}

// awaitMark waits until the load reached its mark, failing if the phase
// ended first (its sessions failed).
func awaitMark(t *testing.T, reached, done <-chan struct{}) {
	select {
	case <-reached:
	case <-done:
		t.Fatal("the load ended before it reached the point of the fault")
	}
}

// statuses counts failures by what they were.
func statuses(fs []failure) map[string]int {
	m := map[string]int{}
	for _, f := range fs {
		key := fmt.Sprint(f.out.status)
		if f.out.err != nil {
			key = f.out.err.Error()
		}
		m[key]++
	}
	return m
}
