package ctl

import (
	"os"
	"os/user"
	"strconv"
	"strings"
)

// peerCred shows the server process behind a unix socket as the kernel
// vouched for it: "pid 4242 (weather-mcp), uid 998 (weather), gid 998
// (weather)". The command and the names are looked up here, on the host
// the daemon runs on; what cannot be found is left out.
func peerCred(pid, uid, gid uint32) string {
	p := strconv.FormatUint(uint64(pid), 10)
	s := "pid " + p
	if comm, err := os.ReadFile("/proc/" + p + "/comm"); err == nil {
		s += " (" + strings.TrimSpace(string(comm)) + ")"
	}
	u := strconv.FormatUint(uint64(uid), 10)
	s += ", uid " + u
	if usr, err := user.LookupId(u); err == nil {
		s += " (" + usr.Username + ")"
	}
	g := strconv.FormatUint(uint64(gid), 10)
	s += ", gid " + g
	if grp, err := user.LookupGroupId(g); err == nil {
		s += " (" + grp.Name + ")"
	}
	return s
}
