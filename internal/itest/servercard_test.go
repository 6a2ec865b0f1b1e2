package itest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// cardGateway runs mcpgated with auth required, a fake backend, two
// clients (alice may use fake__echo only, bob everything) and a profile
// "echoes" of fake__echo and fake__progress, with serverCard as its
// server_card ("" for the default).
func cardGateway(t *testing.T, serverCard string) *testutil.Daemon {
	t.Helper()
	gateway := ""
	if serverCard != "" {
		gateway = fmt.Sprintf("server_card = %q\n", serverCard)
	}
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.fake]
command = %q

[clients.alice]
token_sha256 = %q
tools = ["fake__echo"]

[clients.bob]
token_sha256 = %q

[profiles.echoes]
description = "The echo tools"
tools = ["fake__echo", "fake__progress"]
`, testutil.Build(t).Fake, sha256Hex(aliceToken), sha256Hex(bobToken)), testutil.ConfigOptions{Auth: "required", Gateway: gateway})
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
}

// card is a server card as a client reads it.
type card struct {
	Schema  string `json:"$schema"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Title   string `json:"title"`
	Desc    string `json:"description"`
	Remotes []struct {
		Type     string   `json:"type"`
		URL      string   `json:"url"`
		Versions []string `json:"supportedProtocolVersions"`
	} `json:"remotes"`
	Meta map[string][]struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"_meta"`
}

func (c *card) tools() []string {
	var names []string
	for _, tl := range c.Meta["io.mcpgate/tools"] {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// getCard GETs url with the bearer token (none if "") and the extra
// headers, and returns the response with its body read.
func getCard(t *testing.T, url, token string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/mcp-server-card+json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func parseCard(t *testing.T, resp *http.Response, body []byte) *card {
	t.Helper()
	var c card
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/mcp-server-card+json" || json.Unmarshal(body, &c) != nil {
		t.Fatalf("HTTP %d %s %s; want a server card", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return &c
}

// The server card of the endpoint and of a profile, and the AI catalog
// that lists them: an unauthenticated request sees mcpgate and where to
// connect and no tool; an authenticated one the tools its policy allows
// there; a wrong token is refused, not taken for none.
func TestServerCard(t *testing.T) {
	d := cardGateway(t, "")
	base := strings.TrimSuffix(d.URL, "/mcp")

	resp, body := getCard(t, d.URL+"/server-card", "")
	c := parseCard(t, resp, body)
	if c.Schema != "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json" || c.Name != "127.0.0.1/mcpgate" || c.Version == "" ||
		len(c.Remotes) != 1 || c.Remotes[0].Type != "streamable-http" || c.Remotes[0].URL != d.URL || !slices.Contains(c.Remotes[0].Versions, "2026-07-28") || !slices.Contains(c.Remotes[0].Versions, "2025-11-25") {
		t.Errorf("unauthenticated card %s; want mcpgate at %s in both eras", body, d.URL)
	}
	if c.Meta != nil || strings.Contains(string(body), "fake__") {
		t.Errorf("unauthenticated card %s lists tools", body)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.HasPrefix(resp.Header.Get("Cache-Control"), "public") || resp.Header.Get("ETag") == "" {
		t.Errorf("headers %v; want CORS for everyone, public caching and an ETag", resp.Header)
	}
	if again, _ := getCard(t, d.URL+"/server-card", "", "If-None-Match", resp.Header.Get("ETag")); again.StatusCode != http.StatusNotModified {
		t.Errorf("with its ETag: HTTP %d; want 304", again.StatusCode)
	}

	for _, tc := range []struct {
		who, token, path string
		want             []string
	}{
		{"alice", aliceToken, "/server-card", []string{"fake__echo"}},
		{"alice at the profile", aliceToken, "/echoes/server-card", []string{"fake__echo"}},
		{"bob at the profile", bobToken, "/echoes/server-card", []string{"fake__echo", "fake__progress"}},
	} {
		resp, body := getCard(t, d.URL+tc.path, tc.token)
		c := parseCard(t, resp, body)
		if got := c.tools(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: tools %v; want %v", tc.who, got, tc.want)
		}
		if resp.Header.Get("Cache-Control") != "private, no-cache" {
			t.Errorf("%s: Cache-Control %q; want private", tc.who, resp.Header.Get("Cache-Control"))
		}
	}
	resp, body = getCard(t, d.URL+"/server-card", bobToken)
	if tools := parseCard(t, resp, body).tools(); len(tools) < 10 || !slices.Contains(tools, "fake__crash") {
		t.Errorf("bob's card lists %v; want every tool of fake", tools)
	}
	resp, body = getCard(t, d.URL+"/echoes/server-card", "")
	if c := parseCard(t, resp, body); c.Name != "127.0.0.1/mcpgate.echoes" || c.Desc != "The echo tools" || c.Remotes[0].URL != d.URL+"/echoes" || c.Meta != nil {
		t.Errorf("the profile's unauthenticated card %s; want its name, description and endpoint and no tool", body)
	}

	if resp, body := getCard(t, d.URL+"/server-card", "mcpgate_wrong_token_0123456789"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: HTTP %d %s; want 401", resp.StatusCode, body)
	}
	if resp, _ := getCard(t, d.URL+"/nosuch/server-card", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the card of a profile that is not there: HTTP %d; want 404", resp.StatusCode)
	}

	resp, body = getCard(t, base+"/.well-known/ai-catalog.json", "")
	var cat struct {
		Entries []struct{ Identifier, Type, URL string } `json:"entries"`
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/ai-catalog+json" || json.Unmarshal(body, &cat) != nil || len(cat.Entries) != 2 {
		t.Fatalf("catalog: HTTP %d %s; want two entries", resp.StatusCode, body)
	}
	for i, want := range []string{d.URL + "/server-card", d.URL + "/echoes/server-card"} {
		if e := cat.Entries[i]; e.URL != want || e.Type != "application/mcp-server-card+json" || !strings.HasPrefix(e.Identifier, "urn:air:127.0.0.1:mcp:") {
			t.Errorf("catalog entry %d = %+v; want the card at %s", i, e, want)
		}
		if resp, _ := getCard(t, cat.Entries[i].URL, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("the catalog's %s: HTTP %d", cat.Entries[i].URL, resp.StatusCode)
		}
	}
}

// server_card = "tools" publishes the tools of each endpoint to
// unauthenticated requests; "off" serves neither card nor catalog.
func TestServerCardSettings(t *testing.T) {
	d := cardGateway(t, "tools")
	resp, body := getCard(t, d.URL+"/echoes/server-card", "")
	if got := parseCard(t, resp, body).tools(); !slices.Equal(got, []string{"fake__echo", "fake__progress"}) {
		t.Errorf("published tools of the profile %v; want fake__echo and fake__progress", got)
	}
	// An authenticated client still sees only what its policy allows.
	resp, body = getCard(t, d.URL+"/echoes/server-card", aliceToken)
	if got := parseCard(t, resp, body).tools(); !slices.Equal(got, []string{"fake__echo"}) {
		t.Errorf("alice's tools %v; want fake__echo", got)
	}

	off := cardGateway(t, "off")
	for _, u := range []string{off.URL + "/server-card", strings.TrimSuffix(off.URL, "/mcp") + "/.well-known/ai-catalog.json"} {
		if resp, _ := getCard(t, u, bobToken); resp.StatusCode != http.StatusNotFound {
			t.Errorf("server_card = \"off\": %s HTTP %d; want 404", u, resp.StatusCode)
		}
	}
}
