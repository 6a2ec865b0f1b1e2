package dbusapi

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// sessionsGateway is a fakeGateway whose session count and status line the
// test moves, with clients and listeners.
type sessionsGateway struct {
	*fakeGateway
	sessions atomic.Int64
	status   atomic.Pointer[string]
}

func (g *sessionsGateway) NumSessions() int { return int(g.sessions.Load()) }
func (g *sessionsGateway) Status() string {
	if s := g.status.Load(); s != nil {
		return *s
	}
	return "starting"
}
func (g *sessionsGateway) Listeners() []Listener {
	return []Listener{{Address: "/run/mcpgate/mcpgate.sock", Network: "unix", Origin: "systemd"}}
}
func (g *sessionsGateway) Clients() []ClientStatus {
	return []ClientStatus{{Name: "ci", NSessions: uint32(g.sessions.Load())}}
}
func (g *sessionsGateway) NumClients() int { return min(int(g.sessions.Load()), 1) }
func (g *sessionsGateway) CreateToken(context.Context, string) (string, string, error) {
	return "", "", nil
}
func (g *sessionsGateway) RevokeToken(context.Context, string, string) error { return nil }

// sessionsFixture is a Server of a sessionsGateway on a private bus with
// the given interval, and a connection receiving its signals.
func sessionsFixture(t *testing.T, interval time.Duration) (*sessionsGateway, *Server, *dbus.Conn, chan *dbus.Signal) {
	t.Helper()
	bus := dbustest.Start(t, dbustest.Options{})
	gw := &sessionsGateway{fakeGateway: newFakeGateway()}
	srv, err := NewServer(connect(t, bus.Address), gw, Options{Authorizer: &fakeAuth{}, SessionSignalInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	client := connect(t, bus.Address)
	if err := client.AddMatchSignal(dbus.WithMatchSender(BusName), dbus.WithMatchObjectPath(ManagerPath)); err != nil {
		t.Fatal(err)
	}
	signals := make(chan *dbus.Signal, 1000)
	client.Signal(signals)
	if err := srv.Export(nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.RequestName(); err != nil {
		t.Fatal(err)
	}
	return gw, srv, client, signals
}

// awaitManager returns the next PropertiesChanged of the manager whose
// changed properties satisfy cond, and every such signal before it.
func awaitManager(t *testing.T, signals chan *dbus.Signal, what string, cond func(map[string]dbus.Variant) bool) (map[string]dbus.Variant, []map[string]dbus.Variant) {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	var before []map[string]dbus.Variant
	for {
		select {
		case s := <-signals:
			if s.Path != ManagerPath || s.Name != propertiesChanged || len(s.Body) != 3 {
				continue
			}
			props, _ := s.Body[1].(map[string]dbus.Variant)
			if cond(props) {
				return props, before
			}
			before = append(before, props)
		case <-timer.C:
			t.Fatalf("no PropertiesChanged of the manager with %s within 30s", what)
		}
	}
}

func sessionsAre(n uint32) func(map[string]dbus.Variant) bool {
	return func(p map[string]dbus.Variant) bool {
		v, ok := p["NSessions"]
		return ok && v.Value() == n
	}
}

// TestSessionSignalsAreRateBounded: a burst of sessions opening is
// announced once at once, then not again within the interval, however
// many more open; other changes are announced meanwhile as they happen;
// once the interval ends, the count of that moment is announced, with
// NClients when it changed.
func TestSessionSignalsAreRateBounded(t *testing.T) {
	t.Run("within the interval", func(t *testing.T) {
		gw, srv, client, signals := sessionsFixture(t, time.Hour)
		gw.sessions.Store(1)
		srv.SessionsChanged()
		first, _ := awaitManager(t, signals, "NSessions 1", sessionsAre(1))
		if v, ok := first["NClients"]; !ok || v.Value() != uint32(1) {
			t.Errorf("the first announcement %v lacks NClients 1", first)
		}
		for n := 2; n <= 200; n++ {
			gw.sessions.Store(int64(n))
			srv.SessionsChanged()
		}
		// A change that is not rate-bounded: every pass of the emitter
		// before it, and the one that announces it, is seen by then.
		status := "after the burst"
		gw.status.Store(&status)
		srv.Changed()
		props, before := awaitManager(t, signals, "the new status", func(p map[string]dbus.Variant) bool {
			v, ok := p["Status"]
			return ok && v.Value() == status
		})
		for _, p := range append(before, props) {
			if _, ok := p["NSessions"]; ok {
				t.Errorf("NSessions announced again within the interval: %v", p)
			}
		}
		var v dbus.Variant
		if err := client.Object(BusName, ManagerPath).Call(propertiesInterface+".Get", 0, ManagerInterface, "NSessions").Store(&v); err != nil || v.Value() != uint32(200) {
			t.Errorf("reading NSessions gives %v, %v; want the count of the moment, 200", v.Value(), err)
		}
	})
	t.Run("after the interval", func(t *testing.T) {
		const interval = 50 * time.Millisecond
		gw, srv, _, signals := sessionsFixture(t, interval)
		start := time.Now()
		for n := 1; n <= 200; n++ {
			gw.sessions.Store(int64(n))
			srv.SessionsChanged()
		}
		_, before := awaitManager(t, signals, "NSessions 200", sessionsAre(200))
		// One at once, then at most one per interval: a bound that holds
		// however slow the machine is.
		if n, most := len(before)+1, 2+int(time.Since(start)/interval); n > most {
			t.Errorf("%d announcements in %v, want at most %d", n, time.Since(start), most)
		}
	})
}
