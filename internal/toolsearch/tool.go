package toolsearch

import (
	"encoding/json"
	"maps"
	"slices"
)

// maxParamDepth is how deep into nested object parameters ParseTool looks.
const maxParamDepth = 2

// ParseTool reads the searched parts of an MCP tool definition: name,
// title (or annotations.title), description, and the names and
// descriptions of its input schema's properties, nested objects' to a
// depth of two. What it cannot read it leaves empty.
func ParseTool(raw []byte) Doc {
	var t struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
		InputSchema schema `json:"inputSchema"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return Doc{}
	}
	d := Doc{Name: t.Name, Title: t.Title, Description: t.Description}
	if d.Title == "" {
		d.Title = t.Annotations.Title
	}
	d.Params = t.InputSchema.params(nil, 1)
	return d
}

// schema is what of a JSON Schema ParseTool reads.
type schema struct {
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Items       *schema            `json:"items"`
}

func (s *schema) params(out []Param, depth int) []Param {
	if s == nil || depth > maxParamDepth {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[name]
		desc := ""
		if p != nil {
			desc = p.Description
		}
		out = append(out, Param{Name: name, Description: desc})
		if p != nil {
			out = p.params(out, depth+1)
			if p.Items != nil {
				out = p.Items.params(out, depth+1)
			}
		}
	}
	return out
}
