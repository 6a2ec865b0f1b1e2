package unixuser

import (
	"os/user"
	"slices"
	"strconv"
	"testing"
)

func TestGroups(t *testing.T) {
	u, err := user.LookupId("0")
	if err != nil {
		t.Fatalf("root is not in the user database: %v", err)
	}
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if got := Groups(0); !slices.Contains(got, uint32(gid)) {
		t.Errorf("Groups(0) = %v, want root's primary group %d among them", got, gid)
	}
	if got := Groups(4294967290); got != nil {
		t.Errorf("Groups of an unknown uid = %v, want nil", got)
	}
}
