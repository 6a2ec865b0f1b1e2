// Package unixuser looks up a user's groups in the system's group database.
package unixuser

import (
	"os/user"
	"strconv"
)

// Groups returns the ids of the groups uid belongs to in the group
// database (primary and supplementary), or nil when uid is unknown there.
func Groups(uid uint32) []uint32 {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil
	}
	ids, _ := u.GroupIds()
	var out []uint32
	for _, id := range ids {
		if n, err := strconv.ParseUint(id, 10, 32); err == nil {
			out = append(out, uint32(n))
		}
	}
	return out
}
