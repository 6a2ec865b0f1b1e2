package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
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
	subscribed := func(uri string) bool {
		return structured(t, callTool(t, a, "f__touch", map[string]any{"uri": uri}))["subscribed"] == true
	}
	const uri = "fake://r/0"
	endpoint, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	// together sends n requests at one instant, each on a connection of
	// its own opened beforehand and written whole once all are open: the
	// gateway handles them at once. req says who sends what.
	together := func(n int, req func(i int) (*rawSession, string)) {
		t.Helper()
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", endpoint.Host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(wait)) // a bound for a gateway that hangs, not a wait
			conns[i] = c
		}
		start := make(chan struct{})
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, c := range conns {
			s, method := req(i)
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"uri":%q}}`, i+1, method, uri)
			raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: %s\r\n%s: %s\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
				endpoint.Path, endpoint.Host, mcphttp.AcceptPost, mcphttp.HeaderSession, s.id, mcphttp.HeaderProtocol, s.protocol, len(body), body)
			wg.Go(func() {
				<-start
				if _, err := io.WriteString(c, raw); err != nil {
					errs[i] = err
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					errs[i] = err
					return
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				var m message
				if err := json.Unmarshal(data, &m); err != nil || m.Error != nil || resp.StatusCode != http.StatusOK {
					errs[i] = fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, data)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	request := func(s *rawSession, method string) func(int) (*rawSession, string) {
		return func(int) (*rawSession, string) { return s, method }
	}
	for round := range 30 {
		together(32, request(rawA, "resources/subscribe"))
		if !subscribed(uri) {
			t.Fatalf("round %d: the backend is not subscribed after 32 subscribes", round)
		}
		together(1, request(rawA, "resources/unsubscribe"))
		if subscribed(uri) {
			t.Fatalf("round %d: the backend stays subscribed after the session's one unsubscribe", round)
		}
	}
	for round := range 30 {
		together(32, func(i int) (*rawSession, string) {
			return []*rawSession{rawA, rawB}[i%2], "resources/subscribe"
		})
		together(32, func(i int) (*rawSession, string) {
			if i%2 == 0 {
				return rawB, "resources/subscribe" // B holds on
			}
			return rawA, "resources/unsubscribe"
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
