package dbusapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// TestListProfiles: ListProfiles shows the endpoint and each profile with
// the tools it serves and the bytes of its tools/list, to any local user
// (busctl as nobody, on a private system bus with the packaged policy);
// search mode serves every tool in a list smaller than one tool's
// definition of the whole.
func TestListProfiles(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "needs root to run busctl as nobody")
	}
	policy := filepath.Join(testutil.ModuleRoot(), "packaging", "dbus", "org.mcpgate.Gateway1.conf")
	g := startGatewayConfig(t, dbustest.Options{System: true, Include: []string{policy}}, `
[backends.alpha]
command = "FAKE"

[profiles.echo]
description = "echoing only"
tools = ["alpha__echo"]

[profiles.find]
search = true
`, testutil.ConfigOptions{}, nil)
	out, err := g.busctl(t, true, "--json=short", "call", dbusapi.BusName, string(dbusapi.ManagerPath), dbusapi.ManagerInterface, "ListProfiles")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"type":"a(ssbuu)"`) || !strings.Contains(out, `["echo","echoing only",false,1,`) || !strings.Contains(out, `["find","",true,`) {
		t.Errorf("ListProfiles as nobody: %s", out)
	}
	profiles, err := g.client.ListProfiles(ctx(t))
	if err != nil || len(profiles) != 3 {
		t.Fatalf("ListProfiles = %+v, %v", profiles, err)
	}
	all, echo, find := profiles[0], profiles[1], profiles[2]
	tools, err := g.client.ListTools(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if all.Name != "" || all.Search || int(all.NTools) != len(tools) || all.ListBytes < 1000 {
		t.Errorf("the endpoint: %+v; want all %d tools", all, len(tools))
	}
	if echo.NTools != 1 || echo.ListBytes >= all.ListBytes/10 {
		t.Errorf("profile echo: %+v", echo)
	}
	if !find.Search || find.NTools != all.NTools || find.ListBytes >= all.ListBytes {
		t.Errorf("profile find: %+v; want every tool, in a smaller list than the endpoint's %d bytes", find, all.ListBytes)
	}
}
