package itest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// context7's MCP server (4.1.1, from npm) speaks 2026-07-28 only: every
// result it sends carries resultType and its own serverInfo in _meta. A
// 2025 session gets its results as a 2025 server would write them,
// without either; a 2026-07-28 client gets mcpgate's serverInfo, not the
// server's: no client learns what runs behind the gateway. (Offline, its
// tool answers with an error result, which has the same shape.)
func TestModernServerFromNpmAnswersBothEras(t *testing.T) {
	d := gateway(t, fmt.Sprintf("[backends.c7]\ncommand = %q\n", testutil.NpmServer(t, "context7-mcp")))
	const args = `{"libraryName":"react","query":"hooks"}`
	raw := newRawClient(t, d.URL).post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"c7__resolve-library-id","arguments":`+args+`}}`)
	if !strings.Contains(raw, `"content":[`) || strings.Contains(raw, "resultType") || strings.Contains(raw, "serverInfo") || strings.Contains(raw, "Context7") {
		t.Errorf("a 2025 session got %s; want context7's content, without resultType or its serverInfo", raw)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"c7__resolve-library-id","arguments":%s}}`, args)
	resp, answer := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "c7__resolve-library-id")
	if resp.StatusCode != 200 || !strings.Contains(answer, `"resultType":"complete"`) || !strings.Contains(answer, `serverInfo":{"name":"mcpgate"`) || strings.Contains(answer, "Context7") {
		t.Errorf("a 2026-07-28 client got HTTP %d %s; want a complete result with mcpgate's serverInfo, not context7's", resp.StatusCode, answer)
	}
}
