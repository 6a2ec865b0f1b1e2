package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Concurrent subscribes of one session to one resource count once: one
// unsubscribe then unsubscribes the backend (issue 21, defect 13). Sessions
// holding a subscription each keep the backend subscribed until the last
// one leaves, however their requests interleave.
func TestSubscriptionsCountExactlyUnderConcurrency(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "f", "", "--resources", "2"))
	a := connect(t, d, testutil.NewClientEvents("A"), nil)
	caps := `{"resources":{"subscribe":true}}`
	rawA, rawB := rawInit(t, d.URL, "2025-11-25", caps), rawInit(t, d.URL, "2025-11-25", caps)
	ctx := testutil.Context(t, wait)
	subscribed := func(uri string) bool {
		return structured(t, callTool(t, a, "f__touch", map[string]any{"uri": uri}))["subscribed"] == true
	}
	together := func(n int, do func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = do(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	const uri = "fake://r/0"
	request := func(s *rawSession, method string) func(int) error {
		return func(i int) error {
			resp := s.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"uri":%q}}`, i+1, method, uri))
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var m message
			if err := json.Unmarshal(body, &m); err != nil || m.Error != nil || resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, body)
			}
			return nil
		}
	}
	for round := range 10 {
		together(32, request(rawA, "resources/subscribe"))
		if !subscribed(uri) {
			t.Fatalf("round %d: the backend is not subscribed after 32 subscribes", round)
		}
		together(1, request(rawA, "resources/unsubscribe"))
		if subscribed(uri) {
			t.Fatalf("round %d: the backend stays subscribed after the session's one unsubscribe", round)
		}
	}
	for round := range 10 {
		together(32, func(i int) error {
			return request([]*rawSession{rawA, rawB}[i%2], "resources/subscribe")(i)
		})
		together(32, func(i int) error {
			if i%2 == 0 {
				return request(rawB, "resources/subscribe")(i) // B holds on
			}
			return request(rawA, "resources/unsubscribe")(i)
		})
		if !subscribed(uri) {
			t.Fatalf("round %d: the backend was unsubscribed while B holds a subscription", round)
		}
		together(1, request(rawB, "resources/unsubscribe"))
		if subscribed(uri) {
			t.Fatalf("round %d: the backend stays subscribed after both sessions unsubscribed", round)
		}
	}
}

// max_subscriptions bounds the subscriptions of one session, with an error
// that names the key; unsubscribing makes room.
func TestMaxSubscriptions(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "max_subscriptions = 2\n", fakeBackend(t, "f", "", "--resources", "3"))
	a := connect(t, d, testutil.NewClientEvents("A"), nil)
	b := connect(t, d, testutil.NewClientEvents("B"), nil)
	ctx := testutil.Context(t, wait)
	for _, uri := range []string{"fake://r/0", "fake://r/1", "fake://r/1"} {
		if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "fake://r/2"})
	if err == nil || !strings.Contains(err.Error(), "max_subscriptions") {
		t.Fatalf("a third subscription: %v, want a refusal naming max_subscriptions", err)
	}
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "fake://r/2"}); err != nil {
		t.Fatalf("another session's subscription: %v", err)
	}
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "fake://r/0"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "fake://r/2"}); err != nil {
		t.Fatalf("subscribe after unsubscribing: %v", err)
	}
}
