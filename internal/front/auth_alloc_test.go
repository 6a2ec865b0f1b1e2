package front

import (
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/config"
)

// TestIdentifyWithoutClients: a gateway that knows no clients serves each
// request as the anonymous client that may use everything, without
// copying the request or allocating a client per call.
func TestIdentifyWithoutClients(t *testing.T) {
	h := &Handler{}
	r := httptest.NewRequest("POST", "/mcp", nil)
	w := httptest.NewRecorder()
	got := h.identify(w, r)
	if got == nil {
		t.Fatal("identify refused a request of a gateway without clients")
	}
	c := clientOf(got)
	if c.Name != config.AnonymousClient || !c.Policy.Allows(access.Tools, "any_tool") {
		t.Errorf("clientOf = %q with a policy that does not allow everything; want %q, allowed all", c.Name, config.AnonymousClient)
	}
	if n := testing.AllocsPerRun(100, func() { clientOf(h.identify(w, r)) }); n != 0 {
		t.Errorf("identify without clients allocates %v times per request, want 0", n)
	}
}

// TestIdentifyAuthNone: with auth = "none" every caller is the anonymous
// client; identify records it as seen and lets the request through
// without copying it.
func TestIdentifyAuthNone(t *testing.T) {
	cfg := &config.Config{}
	cfg.Gateway.Auth = "none"
	set, _ := access.NewSet(cfg, access.Options{})
	h := &Handler{opts: Options{Clients: func() *access.Set { return set }}}
	r := httptest.NewRequest("POST", "/mcp", nil)
	w := httptest.NewRecorder()
	got := h.identify(w, r)
	if got == nil {
		t.Fatal("identify refused a request with auth none")
	}
	if c := clientOf(got); c.Name != config.AnonymousClient || !c.Policy.Unrestricted() {
		t.Errorf("clientOf = %q, want the unrestricted %q", c.Name, config.AnonymousClient)
	}
	if set.Client(config.AnonymousClient).LastSeen().IsZero() {
		t.Error("the anonymous client's last request is not recorded")
	}
	if n := testing.AllocsPerRun(100, func() { clientOf(h.identify(w, r)) }); n != 0 {
		t.Errorf("identify with auth none allocates %v times per request, want 0", n)
	}
}
