package dbusapi

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"

	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

func TestBackendPath(t *testing.T) {
	for _, tc := range []struct{ name, label string }{
		{"github", "github"},
		{"my-server", "my_2dserver"},
		{"a_b", "a_5fb"},
		{"x1", "x1"},
		{"7z", "_37z"},
		{"Z9-_", "Z9_2d_5f"},
		{"", "_"},
	} {
		path := BackendPath(tc.name)
		if want := dbus.ObjectPath(BackendPathPrefix + tc.label); path != want {
			t.Errorf("BackendPath(%q) = %s, want %s", tc.name, path, want)
		}
		if !path.IsValid() {
			t.Errorf("BackendPath(%q) = %s is not a valid object path", tc.name, path)
		}
	}
}

// TestXMLMatchesCode proves that the interfaces in
// packaging/dbus/org.mcpgate.Gateway1.xml are what the code implements:
// the same methods with the same argument types, and the same properties
// with the same types.
func TestXMLMatchesCode(t *testing.T) {
	manager, backend, err := Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	gw := newFakeGateway()
	s := &Server{gw: gw}
	for _, tc := range []struct {
		iface   introspect.Interface
		methods any
		props   propertySource
	}{
		{manager, managerObject{s}, managerObject{s}},
		{backend, backendObject{s, "alpha"}, backendObject{s, "alpha"}},
	} {
		t.Run(tc.iface.Name, func(t *testing.T) {
			if got, want := methodSignatures(introspect.Methods(tc.methods)), methodSignatures(tc.iface.Methods); !slices.Equal(got, want) {
				t.Errorf("methods in the code:\n%s\nin the XML:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			_, values, derr := tc.props.properties()
			if derr != nil {
				t.Fatal(derr)
			}
			var got, want []string
			for name, v := range values {
				got = append(got, name+" "+v.Signature().String())
			}
			for _, p := range tc.iface.Properties {
				want = append(want, p.Name+" "+p.Type)
				if p.Access != "read" {
					t.Errorf("property %s: access %q, want read", p.Name, p.Access)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("properties in the code:\n%s\nin the XML:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	var signals []string
	for _, s := range manager.Signals {
		signals = append(signals, s.Name+signature(s.Args))
	}
	if want := []string{"BackendNew(so)", "BackendRemoved(so)"}; !slices.Equal(signals, want) {
		t.Errorf("manager signals %v, want %v (as emitted)", signals, want)
	}
}

func signature(args []introspect.Arg) string {
	var b strings.Builder
	b.WriteByte('(')
	for _, a := range args {
		if a.Direction == "out" {
			b.WriteString("->")
		}
		b.WriteString(a.Type)
	}
	b.WriteByte(')')
	return b.String()
}

func methodSignatures(methods []introspect.Method) []string {
	var out []string
	for _, m := range methods {
		out = append(out, m.Name+signature(m.Args))
	}
	sort.Strings(out)
	return out
}

// fakeGateway is a Gateway whose state the test sets.
type fakeGateway struct {
	mu        sync.Mutex
	backends  map[string]BackendStatus
	reloadErr error
	startErr  error
	calls     []string
}

func newFakeGateway() *fakeGateway {
	return &fakeGateway{backends: map[string]BackendStatus{
		"alpha":     {Name: "alpha", State: "healthy", MainPID: 42, Tools: []string{"alpha__echo"}, Command: []string{"fake", "--tools", "echo"}, StderrTail: []string{"hello"}, Era: "modern", ProtocolVersion: "2026-07-28"},
		"my-server": {Name: "my-server", State: "stopped", Command: []string{"other"}},
	}}
}

func (f *fakeGateway) Version() string  { return "1.2.3" }
func (f *fakeGateway) Status() string   { return "1/2 backends healthy, 1 tool" }
func (f *fakeGateway) NumSessions() int { return 3 }

func (f *fakeGateway) Backends() []BackendStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []BackendStatus
	for _, b := range f.backends {
		b.StderrTail = nil
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b BackendStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (f *fakeGateway) Backend(name string) (BackendStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.backends[name]
	return b, ok
}

func (f *fakeGateway) set(name string, fn func(*BackendStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.backends[name]
	fn(&b)
	f.backends[name] = b
}

func (f *fakeGateway) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.backends, name)
}

func (f *fakeGateway) Tools() []Tool {
	return []Tool{{Name: "alpha__echo", Backend: "alpha", Description: "Echo"}}
}

func (f *fakeGateway) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeGateway) control(verb, name string) error {
	f.record(verb + " " + name)
	if _, ok := f.Backend(name); !ok {
		return fmt.Errorf("%w %q", ErrNoSuchBackend, name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.startErr
}

func (f *fakeGateway) StartBackend(_ context.Context, name string) error {
	return f.control("start", name)
}
func (f *fakeGateway) StopBackend(_ context.Context, name string) error {
	return f.control("stop", name)
}
func (f *fakeGateway) RestartBackend(_ context.Context, name string) error {
	return f.control("restart", name)
}
func (f *fakeGateway) Reload(context.Context) error {
	f.record("reload")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadErr
}

// fakeAuth records what it was asked and answers with err.
type fakeAuth struct {
	mu    sync.Mutex
	err   error
	asked []bool // interactive flags
}

func (a *fakeAuth) Authorize(_ context.Context, sender string, interactive bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sender == "" {
		return errors.New("no sender")
	}
	a.asked = append(a.asked, interactive)
	return a.err
}

// MayReadOutput lets every caller read backend output, like root.
func (a *fakeAuth) MayReadOutput(context.Context, string) error { return nil }

func (a *fakeAuth) set(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

func (a *fakeAuth) lastInteractive() []bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]bool(nil), a.asked...)
}

// fixture is a Server on a private session bus and a client connection.
type fixture struct {
	gw      *fakeGateway
	auth    *fakeAuth
	srv     *Server
	client  *dbus.Conn
	signals chan *dbus.Signal
}

func connect(t *testing.T, addr string) *dbus.Conn {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func newFixture(t *testing.T) *fixture {
	bus := dbustest.Start(t, dbustest.Options{})
	f := &fixture{gw: newFakeGateway(), auth: &fakeAuth{}}
	srvConn := connect(t, bus.Address)
	srv, err := NewServer(srvConn, f.gw, Options{Authorizer: f.auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	f.srv = srv
	f.client = connect(t, bus.Address)
	if err := f.client.AddMatchSignal(dbus.WithMatchSender(BusName)); err != nil {
		t.Fatal(err)
	}
	f.signals = make(chan *dbus.Signal, 100)
	f.client.Signal(f.signals)
	if err := srv.Export([]string{"alpha", "my-server"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RequestName(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) call(path dbus.ObjectPath, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.client.Object(BusName, path).CallWithContext(ctx, method, 0, args...)
}

// awaitSignal returns the next signal, skipping those from the bus itself
// and the manager's PropertiesChanged (which follow the gateway's counts,
// not the objects).
func (f *fixture) awaitSignal(t *testing.T) *dbus.Signal {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case s := <-f.signals:
			if s.Sender == "org.freedesktop.DBus" || s.Path == ManagerPath && s.Name == propertiesChanged {
				continue
			}
			return s
		case <-timer.C:
			t.Fatal("no signal within 10s")
		}
	}
}

func errorName(err error) string {
	var de dbus.Error
	if errors.As(err, &de) {
		return de.Name
	}
	return fmt.Sprintf("not a D-Bus error: %v", err)
}

func TestServerNameTaken(t *testing.T) {
	bus := dbustest.Start(t, dbustest.Options{})
	first := connect(t, bus.Address)
	if reply, err := first.RequestName(BusName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("first RequestName: %v, %v", reply, err)
	}
	srv, err := NewServer(connect(t, bus.Address), newFakeGateway(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	err = srv.RequestName()
	if !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("RequestName = %v, want ErrNameTaken naming the owner's pid", err)
	}
}

func TestServerProperties(t *testing.T) {
	f := newFixture(t)
	alpha := BackendPath("alpha")
	var props map[string]dbus.Variant
	if err := f.call(alpha, propertiesInterface+".GetAll", BackendInterface).Store(&props); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"Name": "alpha", "State": "healthy", "MainPID": uint32(42), "NRestarts": uint32(0),
		"LastExitStatus": int32(0), "LastExitCode": "", "LastError": "", "StateChangeTimestamp": uint64(0),
		"Tools": []string{"alpha__echo"}, "StderrTail": []string{"hello"}, "Command": []string{"fake", "--tools", "echo"},
		"NBytesProcessed": uint64(0), "NBytesReturned": uint64(0), "ToolOutputBytes": []any{},
		"ConsecutiveFailures": uint32(0), "LastCheckTimestamp": uint64(0), "LastCheckLatencyUSec": uint64(0),
		"CircuitOpenTimestamp": uint64(0), "CallsInFlight": uint32(0), "CallsQueued": uint32(0),
		"NCalls": uint64(0), "NFailedCalls": uint64(0), "NFallbacks": uint64(0), "URL": "",
		"Instances": []Instance{}, "NIdle": uint32(0), "NBusy": uint32(0),
		"Unit": "", "TokenExpiryTimestamp": uint64(0), "PeerPID": uint32(0), "PeerUID": uint32(0), "PeerGID": uint32(0), "MemoryCurrent": uint64(0), "TasksCurrent": uint64(0), "CPUUsageNSec": uint64(0),
		"PendingChanges": []PendingChange{},
		"Era":            "modern", "ProtocolVersion": "2026-07-28",
	}
	if len(props) != len(want) {
		t.Errorf("GetAll returned %d properties, want %d: %v", len(props), len(want), props)
	}
	for name, v := range want {
		if got := fmt.Sprint(props[name].Value()); got != fmt.Sprint(v) {
			t.Errorf("%s = %s, want %v", name, got, v)
		}
	}
	var version string
	if err := f.call(ManagerPath, propertiesInterface+".Get", ManagerInterface, "Version").Store(&version); err != nil || version != "1.2.3" {
		t.Errorf("Version = %q, %v", version, err)
	}
	for _, tc := range []struct {
		what string
		call *dbus.Call
		want string
	}{
		{"Set", f.call(alpha, propertiesInterface+".Set", BackendInterface, "State", dbus.MakeVariant("failed")), "org.freedesktop.DBus.Error.PropertyReadOnly"},
		{"unknown property", f.call(alpha, propertiesInterface+".Get", BackendInterface, "Nope"), "org.freedesktop.DBus.Error.UnknownProperty"},
		{"unknown interface", f.call(alpha, propertiesInterface+".Get", "org.example.Nope", "State"), "org.freedesktop.DBus.Error.UnknownInterface"},
		{"GetBackend", f.call(ManagerPath, ManagerInterface+".GetBackend", "nosuch"), ErrorNoSuchBackend},
	} {
		if got := errorName(tc.call.Err); got != tc.want {
			t.Errorf("%s: error %s, want %s", tc.what, got, tc.want)
		}
	}
	var refs []BackendRef
	if err := f.call(ManagerPath, ManagerInterface+".ListBackends").Store(&refs); err != nil {
		t.Fatal(err)
	}
	if want := []BackendRef{{"alpha", alpha}, {"my-server", BackendPath("my-server")}}; !slices.Equal(refs, want) {
		t.Errorf("ListBackends = %v, want %v", refs, want)
	}
	var xmlText string
	if err := f.call(ManagerPath, introspectInterface+".Introspect").Store(&xmlText); err != nil {
		t.Fatal(err)
	}
	var node introspect.Node
	if err := xml.Unmarshal([]byte(xmlText), &node); err != nil {
		t.Fatal(err)
	}
	if len(node.Children) != 1 || node.Children[0].Name != "backend" {
		t.Errorf("manager's children %v, want [backend]", node.Children)
	}
}

func TestServerErrors(t *testing.T) {
	f := newFixture(t)
	cfgErr := errors.New("mcpgate.toml:3:1: backends.x: command is required")
	for _, tc := range []struct {
		name      string
		setup     func()
		path      dbus.ObjectPath
		method    string
		args      []any
		wantName  string
		wantMsg   string
		wantCalls string
	}{
		{"start", nil, ManagerPath, ManagerInterface + ".StartBackend", []any{"alpha"}, "", "", "start alpha"},
		{"no such backend", nil, ManagerPath, ManagerInterface + ".StopBackend", []any{"nosuch"}, ErrorNoSuchBackend, `no such backend "nosuch"`, "stop nosuch"},
		{"object method", nil, BackendPath("my-server"), BackendInterface + ".Restart", nil, "", "", "restart my-server"},
		{"failed", func() { f.gw.startErr = errors.New("handshake: boom") }, BackendPath("alpha"), BackendInterface + ".Start", nil, ErrorFailed, "handshake: boom", "start alpha"},
		{"invalid config", func() { f.gw.reloadErr = InvalidConfig(cfgErr) }, ManagerPath, ManagerInterface + ".Reload", nil, ErrorInvalidConfig, cfgErr.Error(), "reload"},
		{"reload failed", func() { f.gw.reloadErr = context.Canceled }, ManagerPath, ManagerInterface + ".Reload", nil, ErrorFailed, "context canceled", "reload"},
		{"denied", func() { f.auth.set(fmt.Errorf("%w: not you", ErrAccessDenied)) }, ManagerPath, ManagerInterface + ".Reload", nil, ErrorAccessDenied, "access denied: not you", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.gw.mu.Lock()
			f.gw.calls, f.gw.startErr, f.gw.reloadErr = nil, nil, nil
			f.gw.mu.Unlock()
			f.auth.set(nil)
			if tc.setup != nil {
				f.gw.mu.Lock()
				tc.setup()
				f.gw.mu.Unlock()
			}
			err := f.call(tc.path, tc.method, tc.args...).Err
			switch {
			case tc.wantName == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.wantName != "":
				var de dbus.Error
				if !errors.As(err, &de) || de.Name != tc.wantName || de.Error() != tc.wantMsg {
					t.Errorf("error %#v, want %s %q", err, tc.wantName, tc.wantMsg)
				}
			}
			f.gw.mu.Lock()
			calls := strings.Join(f.gw.calls, ",")
			f.gw.mu.Unlock()
			if calls != tc.wantCalls {
				t.Errorf("gateway calls %q, want %q", calls, tc.wantCalls)
			}
		})
	}
	// Reads never ask the authorizer; calls that allow interactive
	// authorization say so.
	f.auth.set(nil)
	f.auth.mu.Lock()
	f.auth.asked = nil
	f.auth.mu.Unlock()
	f.call(ManagerPath, ManagerInterface+".ListTools")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := NewClient(f.client)
	client.Interactive = true
	if err := client.StartBackend(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if got := f.auth.lastInteractive(); !slices.Equal(got, []bool{true}) {
		t.Errorf("authorizer asked %v, want [true] (one interactive call, no read)", got)
	}
}

func TestServerSignals(t *testing.T) {
	f := newFixture(t)
	alpha := BackendPath("alpha")
	changed := func(t *testing.T, s *dbus.Signal) (dbus.ObjectPath, map[string]dbus.Variant) {
		t.Helper()
		if s.Name != propertiesChanged || len(s.Body) != 3 || s.Body[0] != BackendInterface {
			t.Fatalf("got signal %s %v, want PropertiesChanged of %s", s.Name, s.Body, BackendInterface)
		}
		return s.Path, s.Body[1].(map[string]dbus.Variant)
	}

	// my-server starts as announced (stopped): no signal for it, even
	// when told about a change that changed nothing. alpha's first
	// announcement compares with the stopped state objects start in.
	f.srv.Changed()
	path, props := changed(t, f.awaitSignal(t))
	if path != alpha || props["State"].Value() != "healthy" || props["MainPID"].Value() != uint32(42) {
		t.Fatalf("first announcement %s %v", path, props)
	}
	f.srv.Changed() // nothing changed: nothing is emitted
	f.gw.set("alpha", func(b *BackendStatus) { b.MainPID = 43; b.NRestarts = 1 })
	f.srv.Changed()
	path, props = changed(t, f.awaitSignal(t))
	if path != alpha || len(props) != 2 || props["MainPID"].Value() != uint32(43) || props["NRestarts"].Value() != uint32(1) {
		t.Fatalf("got %s %v, want only alpha's MainPID 43 and NRestarts 1", path, props)
	}

	f.gw.set("gamma", func(b *BackendStatus) { b.Name, b.State = "gamma", "starting" })
	f.srv.BackendAdded("gamma")
	s := f.awaitSignal(t)
	if s.Name != ManagerInterface+".BackendNew" || !slices.Equal(s.Body, []any{"gamma", BackendPath("gamma")}) {
		t.Fatalf("got %s %v, want BackendNew gamma", s.Name, s.Body)
	}
	path, props = changed(t, f.awaitSignal(t))
	if path != BackendPath("gamma") || props["State"].Value() != "starting" {
		t.Fatalf("got %s %v, want gamma starting", path, props)
	}
	if err := f.call(BackendPath("gamma"), propertiesInterface+".Get", BackendInterface, "State").Err; err != nil {
		t.Errorf("gamma's object: %v", err)
	}

	f.gw.remove("gamma")
	f.srv.BackendRemoved("gamma")
	s = f.awaitSignal(t)
	if s.Name != ManagerInterface+".BackendRemoved" || !slices.Equal(s.Body, []any{"gamma", BackendPath("gamma")}) {
		t.Fatalf("got %s %v, want BackendRemoved gamma", s.Name, s.Body)
	}
	if err := f.call(BackendPath("gamma"), propertiesInterface+".Get", BackendInterface, "State").Err; err == nil {
		t.Errorf("gamma's object still answers after BackendRemoved")
	}
}
