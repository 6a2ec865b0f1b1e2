package main

import "fmt"

// stoppedReport returns what ExecStopPost= writes to the unit's journal
// after a run, from the variables systemd sets for it (SERVICE_RESULT,
// EXIT_CODE, EXIT_STATUS; systemd.exec(5)): nothing after a clean stop,
// else how the server ended and where its standard error is. The server's
// stderr went to mcpgated, which journals it under mcpgate.service with
// the backend's name, so the unit's own journal would otherwise hold no
// reason for the failure.
func stoppedReport(instance string, getenv func(string) string) string {
	result := getenv("SERVICE_RESULT")
	if result == "" || result == "success" {
		return ""
	}
	how := "failed with result " + result
	switch code, status := getenv("EXIT_CODE"), getenv("EXIT_STATUS"); code {
	case "exited":
		how = "exited with status " + status
	case "killed":
		how = "was killed by signal " + status
	case "dumped":
		how = "dumped core (signal " + status + ")"
	}
	return fmt.Sprintf("backend-exec: the MCP server of backend %s %s (result %s). "+
		"Its standard error went to mcpgated: see its last lines with \"mcpgatectl logs %s\" "+
		"or \"journalctl -u mcpgate.service MCPGATE_BACKEND=%s\" (for instance N of a pool, the pool's name), "+
		"and \"mcpgatectl status %s\".",
		instance, how, result, instance, instance, instance)
}
