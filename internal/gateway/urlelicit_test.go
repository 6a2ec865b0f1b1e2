package gateway

import (
	"encoding/json"
	"testing"
)

// A client is sent an elicitation only in a mode it declared: "url"
// needs elicitation.url; "form" needs elicitation.form or an empty
// elicitation, as clients before 2025-11-25 declare it.
func TestElicitationAllowed(t *testing.T) {
	for _, tc := range []struct {
		caps      string // "" for none
		form, url bool
	}{
		{"", false, false},
		{`{}`, true, false},
		{`{"form":{}}`, true, false},
		{`{"url":{}}`, false, true},
		{`{"form":{},"url":{}}`, true, true},
		{`{"url":{},"URL":{}}`, false, false}, // ambiguous: neither
	} {
		var caps json.RawMessage
		if tc.caps != "" {
			caps = json.RawMessage(tc.caps)
		}
		if got := elicitationAllowed(caps, "form"); got != tc.form {
			t.Errorf("caps %s, form: %v, want %v", tc.caps, got, tc.form)
		}
		if got := elicitationAllowed(caps, "url"); got != tc.url {
			t.Errorf("caps %s, url: %v, want %v", tc.caps, got, tc.url)
		}
	}
	for params, want := range map[string]string{`{"mode":"url","url":"https://x"}`: "url", `{"message":"m"}`: "form", `{"mode":"form"}`: "form"} {
		if got := elicitationMode(json.RawMessage(params)); got != want {
			t.Errorf("elicitationMode(%s) = %s, want %s", params, got, want)
		}
	}
}
