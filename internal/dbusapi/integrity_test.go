package dbusapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// integrityGateway is a fakeGateway that pins what backends offer.
type integrityGateway struct {
	*fakeGateway
}

func (g integrityGateway) DiffChanges(name string, items []string) (string, error) {
	return fmt.Sprintf("diff of %s %v\n", name, items), nil
}

func (g integrityGateway) ReviewChanges(name string, items []string) ([]ReviewedChange, error) {
	return []ReviewedChange{{Kind: "tool", Name: "search", ID: "tool:search@" + strings.Repeat("ab", 32), Approvable: true,
		Reason: "changed since it was approved", Diff: fmt.Sprintf("diff of %s %v\n", name, items)}}, nil
}

func (g integrityGateway) ApproveChanges(_ context.Context, name string, items []string) ([]string, error) {
	g.record("approve " + name + " " + strings.Join(items, ","))
	return []string{"tool:" + strings.Join(items, ",")}, nil
}

func (g integrityGateway) RejectChanges(_ context.Context, name string, items []string) ([]string, error) {
	g.record("reject " + name + " " + strings.Join(items, ","))
	return nil, nil
}

func (g integrityGateway) ResetIntegrity(context.Context) error {
	g.record("reset")
	return nil
}

// actionAuth allows the actions in allowed and records what it was asked.
type actionAuth struct {
	fakeAuth
	mu      sync.Mutex
	allowed map[string]bool
	actions []string
}

func (a *actionAuth) Authorize(ctx context.Context, sender string, interactive bool) error {
	return a.AuthorizeAction(ctx, sender, ManageAction, interactive)
}

func (a *actionAuth) AuthorizeAction(_ context.Context, _, action string, _ bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.actions = append(a.actions, action)
	if !a.allowed[action] {
		return fmt.Errorf("%w: not %s", ErrAccessDenied, action)
	}
	return nil
}

func integrityFixture(t *testing.T, gw Gateway, auth Authorizer) (*Server, *dbus.Conn) {
	t.Helper()
	bus := dbustest.Start(t, dbustest.Options{})
	srv, err := NewServer(connect(t, bus.Address), gw, Options{Authorizer: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.Export([]string{"alpha", "my-server"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RequestName(); err != nil {
		t.Fatal(err)
	}
	return srv, connect(t, bus.Address)
}

// TestApproveNeedsItsOwnAction: approving, rejecting and resetting ask the
// authorizer about ApproveAction, which a grant of ManageAction does not
// give; reading the diff asks nobody.
func TestApproveNeedsItsOwnAction(t *testing.T) {
	gw := integrityGateway{newFakeGateway()}
	auth := &actionAuth{allowed: map[string]bool{ManageAction: true}}
	_, conn := integrityFixture(t, gw, auth)
	client := NewClient(conn)
	ctx := context.Background()
	alpha := BackendPath("alpha")

	if err := client.RestartBackend(ctx, "alpha"); err != nil {
		t.Fatalf("RestartBackend with manage granted: %v", err)
	}
	_, err := client.ApproveChanges(ctx, "alpha", []string{"search"})
	if ErrorName(err) != ErrorAccessDenied || !strings.Contains(err.Error(), ApproveAction) {
		t.Fatalf("ApproveChanges with only manage granted: %v; want AccessDenied naming %s", err, ApproveAction)
	}
	if _, err := client.RejectChanges(ctx, "alpha", nil); ErrorName(err) != ErrorAccessDenied {
		t.Errorf("RejectChanges with only manage granted: %v", err)
	}
	if err := client.ResetIntegrity(ctx); ErrorName(err) != ErrorAccessDenied {
		t.Errorf("ResetIntegrity with only manage granted: %v", err)
	}
	d, err := client.DiffChanges(ctx, "alpha", []string{"search"})
	if err != nil || d != "diff of alpha [search]\n" {
		t.Errorf("DiffChanges = %q, %v", d, err)
	}
	reviewed, err := client.ReviewChanges(ctx, "alpha", []string{"search"})
	if err != nil || len(reviewed) != 1 || reviewed[0].ID != "tool:search@"+strings.Repeat("ab", 32) || !reviewed[0].Approvable ||
		reviewed[0].Diff != "diff of alpha [search]\n" {
		t.Errorf("ReviewChanges = %+v, %v", reviewed, err)
	}
	gw.mu.Lock()
	calls := slices.Clone(gw.calls)
	gw.mu.Unlock()
	if slices.ContainsFunc(calls, func(c string) bool { return !strings.HasPrefix(c, "restart") }) {
		t.Errorf("refused calls reached the gateway: %v", calls)
	}

	auth.mu.Lock()
	auth.allowed[ApproveAction] = true
	auth.mu.Unlock()
	keys, err := client.ApproveChanges(ctx, "alpha", []string{"search"})
	if err != nil || !slices.Equal(keys, []string{"tool:search"}) {
		t.Fatalf("ApproveChanges with approve granted = %v, %v", keys, err)
	}
	if _, err := client.ApproveChanges(ctx, "nope", nil); ErrorName(err) != ErrorNoSuchBackend {
		t.Errorf("ApproveChanges of an unknown backend: %v", err)
	}
	var out []string
	if err := conn.Object(BusName, alpha).Call(BackendInterface+".RejectChanges", 0, []string{}).Store(&out); err != nil || out == nil {
		t.Errorf("RejectChanges returned %v, %v; want an empty array", out, err)
	}
}

// TestIntegrityOffGateway: a gateway that does not pin refuses the
// integrity methods with a reason.
func TestIntegrityOffGateway(t *testing.T) {
	_, conn := integrityFixture(t, newFakeGateway(), &actionAuth{allowed: map[string]bool{ManageAction: true, ApproveAction: true}})
	_, err := NewClient(conn).ApproveChanges(context.Background(), "alpha", nil)
	if err == nil || !strings.Contains(err.Error(), "does not pin") {
		t.Fatalf("ApproveChanges on a gateway without integrity: %v", err)
	}
}

// TestPendingChangesSignal: a change of PendingChanges is announced with
// PropertiesChanged and PendingChangesChanged.
func TestPendingChangesSignal(t *testing.T) {
	f := newFixture(t)
	f.srv.Changed()
	f.gw.set("alpha", func(b *BackendStatus) {
		b.PendingChanges = []PendingChange{{Kind: "tool", Name: "search", Reason: "changed since it was approved"}}
	})
	f.srv.Changed()
	for {
		s := f.awaitSignal(t)
		if s.Path != BackendPath("alpha") {
			continue
		}
		if s.Name == BackendInterface+".PendingChangesChanged" {
			if len(s.Body) != 1 || s.Body[0] != uint32(1) {
				t.Fatalf("PendingChangesChanged body %v, want [1]", s.Body)
			}
			break
		}
	}
	var v []PendingChange
	if err := f.call(BackendPath("alpha"), propertiesInterface+".Get", BackendInterface, "PendingChanges").Store(&v); err != nil || len(v) != 1 || v[0].Name != "search" {
		t.Fatalf("PendingChanges = %v, %v", v, err)
	}
}
