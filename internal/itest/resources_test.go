package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A URI no backend lists or matches by template still reaches the only
// backend that has resources: servers may serve URIs they do not list.
// And a subscription the backend refuses is not kept: a second attempt
// goes to the backend again.
func TestResourcesOfTheOnlyResourceBackend(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	d := gateway(t, fmt.Sprintf(`
[backends.r]
command = "FAKE"
args = ["--resources", "2", "--record", %q]

[backends.plain]
command = "FAKE"
`, rec))
	c := newRawClient(t, d.URL)
	body := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"other://unlisted"}}`)
	if strings.Contains(body, "no backend serves") || !strings.Contains(body, `"error"`) {
		t.Errorf("read of an unlisted uri = %s; want the backend's own answer", body)
	}
	awaitFile(t, rec, `"uri":"other://unlisted"`)

	for i := range 2 {
		body := c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"other://nope"}}`, 10+i))
		if !strings.Contains(body, `"error"`) {
			t.Errorf("subscribe %d to a uri the backend refuses = %s; want its error", i, body)
		}
	}
	data, _ := os.ReadFile(rec)
	if n := strings.Count(string(data), `"method":"resources/subscribe"`); n != 2 {
		t.Errorf("the backend saw %d subscribe requests, want 2: a refused subscription must not be kept", n)
	}
}
