package itest

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// A stateless request has no session, but an identifier of its own: the
// audit entry of its call and the entry about the instance bound to it
// carry the same request=, distinct per request, and its session= stays
// empty. Its 2026-07-28 _meta members do not reach a backend of the
// legacy era, its progress token does.
func TestStatelessRequestJournalAndMeta(t *testing.T) {
	record := filepath.Join(t.TempDir(), "fake.jsonl")
	d := lifecycleGatewayWith(t, t.TempDir(), "audit = \"calls\"\n", pooledBackend+fmt.Sprintf(`
[backends.plain]
command = "FAKE"
args = ["--record", %q]
`, record))
	testutil.Eventually(t, 30*time.Second, "the pool's idle instance", func() bool { return len(children(d)) >= 2 })
	requestOf := regexp.MustCompile(` request=(r[0-9a-f]{8}-[0-9a-z]+)( |$)`)
	var ids []string
	for i := range 2 {
		resp, body := exchange(t, http.DefaultClient, d.URL, statelessBody(i, "tools/call", `"name":"ded__pid"`),
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "ded__pid")
		if _, errMsg := statelessResult(t, body); resp.StatusCode != 200 || errMsg != "" {
			t.Fatalf("stateless call %d: HTTP %d %s", i, resp.StatusCode, body)
		}
		var bound, audit string
		d.Stderr.Await(t, 10*time.Second, "the bound instance and the audit entry of the stateless call", func(out string) bool {
			bound, audit = "", ""
			for _, line := range strings.Split(out, "\n") {
				m := requestOf.FindStringSubmatch(line)
				if m == nil || len(ids) > 0 && m[1] == ids[0] {
					continue
				}
				switch {
				case strings.Contains(line, "to a stateless request of client"):
					bound = m[1]
				case strings.Contains(line, "message_id=af84f9ba2bdf44638ea8e737adfb73ba") && strings.Contains(line, "tool=ded__pid") && strings.Contains(line, `session="" request=`+m[1]):
					audit = m[1]
				}
			}
			return bound != "" && audit != ""
		})
		if bound != audit {
			t.Errorf("call %d: the instance was bound to request %s, the audit entry names %s; want one identifier", i, bound, audit)
		}
		ids = append(ids, bound)
	}
	if ids[0] == ids[1] {
		t.Errorf("two stateless requests share the identifier %s", ids[0])
	}

	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"tok-7","io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info"},` +
		`"name":"plain__echo","arguments":{"text":"legacy-meta"}}}`
	if resp, answer := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "plain__echo"); resp.StatusCode != 200 || !strings.Contains(answer, "legacy-meta") {
		t.Fatalf("plain__echo: HTTP %d %s", resp.StatusCode, answer)
	}
	line := awaitRecorded(t, record, "the stateless call at plain", `"name":"echo"`, "legacy-meta")
	if strings.Contains(line, "io.modelcontextprotocol/") || !strings.Contains(line, `"progressToken":`) {
		t.Errorf("the legacy backend read %s; want the request without the 2026-07-28 _meta members, with a progress token", line)
	}
}
