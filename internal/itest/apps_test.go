package itest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// appsServer is the command of a real MCP Apps server from npm: its tool
// get-time shows its view ui://get-time/mcp-app.html.
func appsServer(t *testing.T) string {
	return testutil.NpmServer(t, "mcp-server-basic-vanillajs")
}

// viewURI returns the ui:// URI a tool's _meta names its view by.
func viewURI(tool *mcp.Tool) string {
	ui, _ := tool.Meta["ui"].(map[string]any)
	uri, _ := ui["resourceUri"].(string)
	return uri
}

// readView reads uri and returns its one content.
func readView(t *testing.T, cs *mcp.ClientSession, uri string) *mcp.ResourceContents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("read %s: %v, %+v", uri, err, res)
	}
	return res.Contents[0]
}

// Two instances of a real MCP Apps server behind the gateway offer the
// same ui:// URI: each one's tool names its view under its backend's
// prefix, the client reads each view from the backend that offers the
// tool, the view keeps its MIME type and bytes, and the tool's calls (an
// App's too) meet the client's policy as any call.
func TestAppsServerBehindTheGateway(t *testing.T) {
	bin := appsServer(t)
	d := gatewayWith(t, "", fmt.Sprintf(`
[backends.apps1]
command = %[1]q
args = ["--stdio"]

[backends.apps2]
command = %[1]q
args = ["--stdio"]
`, bin))
	cs := d.Connect(t, nil)
	views := map[string]string{}
	testutil.Eventually(t, 60*time.Second, "both Apps servers' tools", func() bool {
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			return false
		}
		for _, tl := range tools.Tools {
			if strings.HasSuffix(tl.Name, "__get-time") {
				views[tl.Name] = viewURI(tl)
			}
		}
		return len(views) == 2
	})
	for _, b := range []string{"apps1", "apps2"} {
		want := "ui://" + b + "__get-time/mcp-app.html"
		if got := views[b+"__get-time"]; got != want {
			t.Errorf("%s__get-time's view is %q; want %q, its backend's ui://get-time/mcp-app.html under its prefix", b, got, want)
		}
		c := readView(t, cs, want)
		if c.URI != want || c.MIMEType != "text/html;profile=mcp-app" || !strings.Contains(strings.ToLower(c.Text), "<html") {
			t.Errorf("view of %s: uri %q, mime %q, %d bytes; want the App's HTML under the exposed URI", b, c.URI, c.MIMEType, len(c.Text))
		}
	}
	resources, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range resources.Resources {
		listed = append(listed, r.URI)
	}
	if got := strings.Join(listed, " "); !strings.Contains(got, "ui://apps1__get-time/mcp-app.html") || !strings.Contains(got, "ui://apps2__get-time/mcp-app.html") {
		t.Errorf("resources %s; want both views, each under its prefix", got)
	}
	if res := testutil.MustCallTool(t, cs, "apps2__get-time", map[string]any{}); res.IsError || testutil.ToolText(res) == "" {
		t.Errorf("apps2__get-time = %+v; want the time", res)
	}
}

// The same server twice without tool prefixes: the second one's view
// collides with the first's, so its tool is not served with the first's
// view; the catalog conflict says what to do. An App's call back into a
// tool the client's policy denies is refused as any call.
func TestAppsViewCollisionAndPolicy(t *testing.T) {
	bin := appsServer(t)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.apps1]
command = %[1]q
args = ["--stdio"]
tool_prefix = ""

[backends.apps2]
command = %[1]q
args = ["--stdio"]
tool_prefix = "two__"

[backends.apps3]
command = %[1]q
args = ["--stdio"]
tool_prefix = ""

[clients.alice]
token_sha256 = %[2]q
tools = ["get-time"]
resources = ["ui://get-time/*"]
`, bin, sha256Hex(aliceToken)), testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	d.Stderr.Await(t, 60*time.Second, "the collision of apps3's view", func(out string) bool {
		return strings.Contains(out, `its view ui://get-time/mcp-app.html is a resource of backend \"apps1\"`) ||
			strings.Contains(out, `tool \"get-time\" of backend \"apps3\" is hidden`)
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "apps-host", Version: "1"}, nil)
	cs, err := client.Connect(testutil.Context(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: d.URL, HTTPClient: tokenClient(aliceToken), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	c := readView(t, cs, "ui://get-time/mcp-app.html")
	if c.URI != "ui://get-time/mcp-app.html" || c.MIMEType != "text/html;profile=mcp-app" {
		t.Errorf("apps1's view: %q %q", c.URI, c.MIMEType)
	}
	if res := testutil.MustCallTool(t, cs, "get-time", map[string]any{}); res.IsError {
		t.Errorf("get-time = %+v; want alice's allowed call answered", res)
	}
	// The call the App of apps2 would make: alice's policy denies it.
	if res, err := testutil.CallTool(t, cs, "two__get-time", map[string]any{}); err == nil && !res.IsError {
		t.Errorf("two__get-time for alice = %+v; want it refused by her policy", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ui://two__get-time/mcp-app.html"}); err == nil {
		t.Error("alice read apps2's view, which her policy does not allow")
	}
}
