package unitrun

import (
	"regexp"
	"strings"
	"testing"
)

// TestUnitName: a name that fits a user name is kept; a longer one gets a
// short, stable name that the template's User=mcpgate-%i accepts.
func TestUnitName(t *testing.T) {
	long := strings.Repeat("github-enterprise-", 3)
	for _, tc := range []struct{ name, want string }{
		{"github", "mcpgate-backend@github.service"},
		{"fs-2", "mcpgate-backend@fs-2.service"},
		{strings.Repeat("a", 23), "mcpgate-backend@" + strings.Repeat("a", 23) + ".service"},
		{strings.Repeat("a", 24), "mcpgate-backend@aaaaaaaaaaaaaa-"},
		{long, "mcpgate-backend@github-enterpr-"},
		{"-dash", "mcpgate-backend@_-dash-"},
	} {
		got := UnitName(tc.name, 0)
		if !strings.HasPrefix(got, tc.want) || !strings.HasSuffix(got, ".service") {
			t.Errorf("UnitName(%q) = %q, want %q…", tc.name, got, tc.want)
		}
		user := "mcpgate-" + InstanceName(tc.name)
		if len(user) > 31 || !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`).MatchString(user) {
			t.Errorf("user %q of backend %q is not a valid user name of at most 31 characters", user, tc.name)
		}
		if again := UnitName(tc.name, 0); again != got {
			t.Errorf("UnitName(%q) is not stable: %q, then %q", tc.name, got, again)
		}
	}
	if got := UnitName("fs", 2); got != "mcpgate-backend@fs-2.service" {
		t.Errorf("UnitName(fs, 2) = %q, want instance 2 of pool fs", got)
	}
	if UnitName(long, 0) == UnitName(long+"x", 0) {
		t.Error("two long names that share their start map to one unit")
	}
}
