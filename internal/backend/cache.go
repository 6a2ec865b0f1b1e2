package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// catalogCache is what an on-demand backend remembers of its last
// successful handshake: enough to list its tools, prompts and resources
// while no child runs.
type catalogCache struct {
	server *ServerInfo
	lists  *Lists
}

// cacheVersion is written into every cache file; a file of another version
// is ignored like a corrupt one. Version 1 was written with HTML escapes
// ("\u003c" for "<") inside the server's items: not the bytes it sent.
const cacheVersion = 2

// cacheFile is the JSON shape of a cache file.
type cacheFile struct {
	Version         int               `json:"version"`
	ProtocolVersion string            `json:"protocolVersion"`
	Dual            bool              `json:"dual,omitempty"`
	Name            string            `json:"name"`
	ServerVersion   string            `json:"serverVersion"`
	Instructions    string            `json:"instructions,omitempty"`
	Capabilities    Capabilities      `json:"capabilities"`
	Tools           []json.RawMessage `json:"tools"`
	Prompts         []json.RawMessage `json:"prompts"`
	Resources       []json.RawMessage `json:"resources"`
	Templates       []json.RawMessage `json:"resourceTemplates"`
}

// encodeCache returns c as a cache file holds it.
func encodeCache(c *catalogCache) ([]byte, error) {
	f := cacheFile{
		Version: cacheVersion, ProtocolVersion: c.server.ProtocolVersion, Dual: c.server.Dual, Name: c.server.Name, ServerVersion: c.server.Version,
		Instructions: c.server.Instructions, Capabilities: c.server.Capabilities,
		Tools: c.lists.Tools, Prompts: c.lists.Prompts, Resources: c.lists.Resources, Templates: c.lists.Templates,
	}
	// Without HTML escaping: the items must read back as the server sent
	// them, the bytes integrity pins.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readCache reads a cache file. It returns (nil, nil) when there is none.
func readCache(path string) (*catalogCache, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCache(data)
}

// parseCache reads what encodeCache wrote.
func parseCache(data []byte) (*catalogCache, error) {
	var f cacheFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if f.Version != cacheVersion || f.ProtocolVersion == "" {
		return nil, fmt.Errorf("version %d without a protocolVersion is not a catalog cache of this mcpgate (version %d)", f.Version, cacheVersion)
	}
	// An undeclared capability was written as null; it must read back as
	// undeclared, not as a declared null.
	for _, raw := range []*json.RawMessage{&f.Capabilities.Logging, &f.Capabilities.Completions} {
		if string(*raw) == "null" {
			*raw = nil
		}
	}
	return &catalogCache{
		server: &ServerInfo{ProtocolVersion: f.ProtocolVersion, Dual: f.Dual, Name: f.Name, Version: f.ServerVersion, Instructions: f.Instructions, Capabilities: f.Capabilities},
		lists:  &Lists{Tools: f.Tools, Prompts: f.Prompts, Resources: f.Resources, Templates: f.Templates},
	}, nil
}

// writeCache replaces the cache file atomically: a reader, or a gateway
// that crashes meanwhile, sees the old file or the new one, never a part.
func writeCache(path string, c *catalogCache) error {
	data, err := encodeCache(c)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
