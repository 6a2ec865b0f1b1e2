package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestStatelessListenFollowsTheProfile: a 2026-07-28 listener at a
// profile's path hears of changes to the tools the profile selects, not of
// others': b's change is followed by a resource update of a's, with no
// tools/list_changed before it; a's change brings one.
func TestStatelessListenFollowsTheProfile(t *testing.T) {
	d := startGateway(t, "", fakeBackend(t, "a", "", "--resources", "1"), fakeBackend(t, "b", ""),
		"[profiles.ro]\nbackends = [\"a\"]\n\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro := d.URL + "/ro"
	resp := postRaw(t, ctx, ro, modernBody("L1", "subscriptions/listen", `"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://r/0"]}`, modernMeta(`{}`)), modernHeaders("subscriptions/listen", "")...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listen at %s: HTTP %d", ro, resp.StatusCode)
	}
	events := make(chan message, 16)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 0 {
				events <- decode(t, string(ev.Data))
			}
		}
	}()
	next := func(what string) message {
		t.Helper()
		select {
		case m, ok := <-events:
			if !ok {
				t.Fatalf("the listen stream ended before %s", what)
			}
			return m
		case <-time.After(wait):
			t.Fatalf("no %s on the listen stream", what)
		}
		return message{}
	}
	if m := next("acknowledgement"); m.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %+v, want the acknowledgement", m)
	}
	call := func(url, tool, args string) {
		t.Helper()
		status, m := modernCall(t, url, modernBody(1, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), modernMeta(`{}`)), modernHeaders("tools/call", tool)...)
		if status != http.StatusOK || m["error"] != nil {
			t.Fatalf("%s: HTTP %d %v", tool, status, m)
		}
	}
	call(d.URL, "b__set_tools", `{"names":["zeta"]}`)
	testutil.Eventually(t, wait, "b__zeta in the catalog", func() bool {
		_, m := modernCall(t, d.URL, modernBody(2, "tools/list", "", modernMeta(`{}`)), modernHeaders("tools/list", "")...)
		return strings.Contains(fmt.Sprint(m["result"]), "b__zeta")
	})
	call(ro, "a__touch", `{"uri":"fake://r/0"}`)
	if m := next("the resource update"); m.Method != "notifications/resources/updated" {
		t.Errorf("got %+v first, want the resource update: b's change is none of the profile's", m)
	}
	call(ro, "a__set_tools", `{"names":["eta"]}`)
	if m := next("tools/list_changed"); m.Method != "notifications/tools/list_changed" {
		t.Errorf("got %+v, want tools/list_changed for a's change", m)
	}
}
