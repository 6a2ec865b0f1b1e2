package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// A remote backend with its own OAuth token shows when the token expires;
// one without shows nothing of the kind.
func TestPrintTokenExpiry(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	b := dbusapi.BackendStatus{Name: "a", State: "healthy", URL: "https://gw-a.example/mcp",
		TokenExpiryTimestamp: uint64(now.Add(5 * time.Minute).UnixMicro())}
	var out bytes.Buffer
	printBackend(&out, b, now, false)
	if got := out.String(); !strings.Contains(got, " OAuth token: expires Fri 2026-11-27 10:05:00 UTC; in 5m0s\n") {
		t.Errorf("got:\n%s\nwant the token's expiry", got)
	}
	out.Reset()
	printBackend(&out, b, now.Add(10*time.Minute), false)
	if got := out.String(); !strings.Contains(got, "; expired 5min 0s ago\n") {
		t.Errorf("got:\n%s\nwant the token expired", got)
	}
	out.Reset()
	b.TokenExpiryTimestamp = 0
	printBackend(&out, b, now, false)
	if strings.Contains(out.String(), "OAuth") {
		t.Errorf("got:\n%s\nwant no token line for a backend without one", out.String())
	}
}
