package front

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// The server card extension's documents: a card per endpoint (the
// endpoint itself and each profile's) at ENDPOINT/server-card, and the AI
// catalog that lists them at CatalogPath. They describe mcpgate itself.
// Tools are listed under _meta (the card's own schema lists none): to an
// authenticated caller those its policy allows at that endpoint; to an
// unauthenticated one none, unless server_card = "tools".
const (
	// CatalogPath is where the AI catalog of the endpoints is served.
	CatalogPath     = "/.well-known/ai-catalog.json"
	mediaServerCard = "application/mcp-server-card+json"
	mediaAICatalog  = "application/ai-catalog+json"
	cardSchema      = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
	// MetaCardTools is the _meta member of a card that lists its tools.
	MetaCardTools = "io.mcpgate/tools"
)

// serveCard answers a request for a server card or the AI catalog, and
// reports whether path was one of them.
func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.ServerCard == "off" || h.opts.ServerCard == "" {
		return false
	}
	profile, isCard := h.cardOf(r.URL.Path)
	if !isCard && r.URL.Path != CatalogPath {
		return false
	}
	if !h.hostAllowed(r.Host) {
		h.httpError(w, http.StatusForbidden, "Host %q is not allowed; add it to allowed_hosts in the [gateway] section to serve it", r.Host)
		return true
	}
	// Public metadata, read-only: any origin may read it (the extension
	// asks for these headers).
	w.Header().Set("Access-Control-Expose-Headers", "ETag")
	if h.readOnly(w, r, "Content-Type, If-None-Match, Authorization", "a server card") {
		return true
	}
	client, authenticated, ok := h.cardCaller(w, r)
	if !ok {
		return true
	}
	var body []byte
	media := mediaAICatalog
	if isCard {
		card, found := h.card(r, profile, client, authenticated)
		if !found {
			h.notFound(w, strings.TrimSuffix(r.URL.Path, "/"+config.ServerCardSegment))
			return true
		}
		body, media = card, mediaServerCard
	} else {
		body = h.aiCatalog(r)
	}
	h.writeCard(w, r, body, media, authenticated)
	return true
}

// cardOf says whether path is the server card of an endpoint, and of
// which profile ("" for the endpoint itself).
func (h *Handler) cardOf(path string) (profile string, ok bool) {
	endpoint, ok := strings.CutSuffix(path, "/"+config.ServerCardSegment)
	if !ok {
		return "", false
	}
	if endpoint == strings.TrimSuffix(h.opts.Endpoint, "/") {
		return "", true
	}
	name, below := strings.CutPrefix(endpoint, strings.TrimSuffix(h.opts.Endpoint, "/")+"/")
	if !below || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// cardCaller finds who asks for a card: the client of the request's
// token, or of its unix socket peer, as for the MCP endpoint. A request
// without a token that nothing else identifies is unauthenticated, not
// refused: the card is public. A token that is refused is refused here
// too (ok false, answered), so that a wrong token is never mistaken for
// none.
func (h *Handler) cardCaller(w http.ResponseWriter, r *http.Request) (client *access.Client, authenticated, ok bool) {
	if h.opts.Clients == nil {
		return nil, false, true
	}
	set := h.opts.Clients()
	if r.Header.Get("Authorization") != "" {
		if r = h.identify(w, r); r == nil {
			return nil, false, false
		}
	} else if set.Required() {
		c, refusal := set.Identify(r, access.PeerFrom(r.Context()))
		if refusal != nil || c.Client == nil {
			return nil, false, true
		}
		return c.Client, c.Client.Name != config.AnonymousClient, true
	}
	c := clientOf(r)
	return c, c.Name != config.AnonymousClient, true
}

// serverCard is the document of the extension's schema, as mcpgate fills
// it.
type serverCard struct {
	Schema      string          `json:"$schema"`
	Name        string          `json:"name"`
	Version     string          `json:"version"`
	Description string          `json:"description"`
	Title       string          `json:"title"`
	Remotes     []cardRemote    `json:"remotes"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

type cardRemote struct {
	Type     string   `json:"type"`
	URL      string   `json:"url"`
	Versions []string `json:"supportedProtocolVersions"`
}

// card returns the server card of the endpoint of profile for the
// caller; found is false when no such profile is configured.
func (h *Handler) card(r *http.Request, profile string, client *access.Client, authenticated bool) (body []byte, found bool) {
	c := serverCard{
		Schema:      cardSchema,
		Name:        cardName(r.Host, profile),
		Version:     h.opts.Version,
		Title:       "mcpgate",
		Description: "mcpgate: the MCP servers of this host behind one endpoint",
		Remotes:     []cardRemote{{Type: "streamable-http", URL: h.origin(r) + h.endpointPath(profile), Versions: gateway.SupportedVersions()}},
	}
	if profile != "" {
		c.Title = "mcpgate: " + profile
		c.Description = "mcpgate, profile " + profile
		for _, p := range h.g.Profiles() {
			if p.Name == profile && p.Description != "" {
				c.Description = p.Description
			}
		}
		c.Description = truncateRunes(c.Description, 100)
	}
	var tools []gateway.CardTool
	switch {
	case authenticated:
		tools, found = h.g.CardTools(client, profile)
	case h.opts.ServerCard == "tools":
		tools, found = h.g.CardTools(nil, profile)
	default:
		found = profile == "" || h.g.HasProfile(profile)
	}
	if !found {
		return nil, false
	}
	if authenticated || h.opts.ServerCard == "tools" {
		meta, _ := json.Marshal(map[string]any{MetaCardTools: nonNilTools(tools)})
		c.Meta = meta
	}
	body, _ = json.Marshal(c)
	return body, true
}

// aiCatalog returns the AI catalog of the endpoint and its profiles.
func (h *Handler) aiCatalog(r *http.Request) []byte {
	type entry struct {
		Identifier string `json:"identifier"`
		Type       string `json:"type"`
		URL        string `json:"url"`
	}
	publisher := splitHost(r.Host)
	if publisher == "" || strings.ContainsAny(publisher, ":[]") {
		publisher = "localhost"
	}
	var entries []entry
	for _, profile := range append([]string{""}, h.g.ProfileNames()...) {
		_, name, _ := strings.Cut(cardName(r.Host, profile), "/")
		entries = append(entries, entry{
			Identifier: "urn:air:" + publisher + ":mcp:" + name,
			Type:       mediaServerCard,
			URL:        h.origin(r) + h.endpointPath(profile) + "/" + config.ServerCardSegment,
		})
	}
	body, _ := json.Marshal(map[string]any{"specVersion": "1.0", "entries": entries})
	return body
}

// writeCard writes a card or the catalog with its validator: what an
// unauthenticated request gets may be cached by anyone for five minutes;
// what a client gets, only by it, revalidated each time.
func (h *Handler) writeCard(w http.ResponseWriter, r *http.Request, body []byte, media string, authenticated bool) {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Vary", "Authorization")
	if authenticated {
		w.Header().Set("Cache-Control", "private, no-cache")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=300")
	}
	if slices.Contains(strings.Split(strings.ReplaceAll(r.Header.Get("If-None-Match"), " ", ""), ","), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", media)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// origin is the scheme and host the card's URLs are under: those of the
// OAuth resource when one is configured (what a client must name), else
// the request's Host, which hostAllowed checked.
func (h *Handler) origin(r *http.Request) string {
	if h.opts.Clients != nil {
		if o := h.opts.Clients().OAuth(); o != nil {
			if res := o.Resource(access.PeerFrom(r.Context())); res != "" {
				if i := strings.Index(res, "://"); i > 0 {
					if j := strings.IndexByte(res[i+3:], '/'); j >= 0 {
						return res[:i+3+j]
					}
					return res
				}
			}
		}
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	return scheme + host
}

// endpointPath is the path of the endpoint of profile.
func (h *Handler) endpointPath(profile string) string {
	if profile == "" {
		return h.opts.Endpoint
	}
	return strings.TrimSuffix(h.opts.Endpoint, "/") + "/" + profile
}

// cardNamePart is what a server card's name is made of, each side of its
// slash.
var cardNamePart = regexp.MustCompile(`^[a-zA-Z0-9.-]+$`)

// cardName is a card's name in reverse-DNS form: the request's host name
// reversed ("gw.example.com" gives "com.example.gw/mcpgate"), "localhost"
// and addresses as they are, anything else "io.mcpgate"; a profile's
// name after a dot ("…/mcpgate.readonly").
func cardName(host, profile string) string {
	h := splitHost(host)
	ns := "io.mcpgate"
	switch {
	case net.ParseIP(h) != nil && cardNamePart.MatchString(h), h == "localhost":
		ns = h
	case strings.Contains(h, ".") && cardNamePart.MatchString(h):
		labels := strings.Split(strings.ToLower(h), ".")
		slices.Reverse(labels)
		ns = strings.Join(labels, ".")
	}
	name := "mcpgate"
	if profile != "" {
		name += "." + profile
	}
	return ns + "/" + name
}

func nonNilTools(t []gateway.CardTool) []gateway.CardTool {
	if t == nil {
		return []gateway.CardTool{}
	}
	return t
}

// truncateRunes cuts s to at most n runes.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
