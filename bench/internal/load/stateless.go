package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/mcpgate/mcpgate/bench/internal/splice"
)

// Protocol2026 is the MCP revision of stateless clients: no initialize, no
// session; every request names the revision and the client's capabilities.
const Protocol2026 = "2026-07-28"

// meta2026 is the _meta every stateless request carries.
const meta2026 = `{"io.modelcontextprotocol/protocolVersion":"` + Protocol2026 +
	`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpbench","version":"1"}}`

// OpenStateless returns n 2026-07-28 clients of url, each on its own
// connection, once each has been answered server/discover: a gateway that
// does not serve the revision fails here, not in every call.
func OpenStateless(ctx context.Context, url string, n int, payload, token string) ([]*Session, error) {
	sessions := make([]*Session, n)
	for i := range sessions {
		sessions[i] = NewSession(url, payload)
		sessions[i].token, sessions[i].stateless = token, true
	}
	if err := sessions[0].discover(ctx); err != nil {
		CloseAll(sessions)
		return nil, err
	}
	return sessions, nil
}

// discover asks server/discover, as a 2026-07-28 client does first.
func (s *Session) discover(ctx context.Context) error {
	s.next++
	body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(s.next, 10) + `,"method":"server/discover","params":{"_meta":` + meta2026 + `}}`
	_, msg, err := s.post(ctx, []byte(body), s.next)
	if err != nil {
		return fmt.Errorf("server/discover: %w", err)
	}
	if splice.Value(msg, "result") == nil {
		return fmt.Errorf("server/discover: %.200s", msg)
	}
	return nil
}

// setHeaders2026 sets the headers a 2026-07-28 request carries: the
// revision, and the method (and the tool, for a call) that the body names.
func setHeaders2026(req *http.Request, body []byte) {
	req.Header["Mcp-Protocol-Version"] = protocol2026Header
	switch {
	case bytes.Contains(body, []byte(`"method":"tools/call"`)):
		req.Header["Mcp-Method"] = toolsCallHeader
		req.Header["Mcp-Name"] = echoHeader
		if bytes.Contains(body, []byte(`"name":"blob"`)) {
			req.Header["Mcp-Name"] = blobHeader
		}
	case bytes.Contains(body, []byte(`"method":"server/discover"`)):
		req.Header["Mcp-Method"] = discoverHeader
	}
}

// Header values shared by every request: no allocation per call.
var (
	protocol2026Header = []string{Protocol2026}
	toolsCallHeader    = []string{"tools/call"}
	discoverHeader     = []string{"server/discover"}
	echoHeader         = []string{"echo"}
	blobHeader         = []string{"blob"}
)
