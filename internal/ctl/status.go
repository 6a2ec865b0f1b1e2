package ctl

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// statusJSON is what "status --json" prints.
type statusJSON struct {
	Gateway  dbusapi.ManagerStatus   `json:"gateway"`
	Backends []dbusapi.BackendStatus `json:"backends"`
	// Profiles are the endpoint and its profiles (ListProfiles); empty
	// from a gateway that predates them.
	Profiles []dbusapi.ProfileStatus `json:"profiles,omitempty"`
}

func (c *cli) status(args []string) int {
	return c.withClient(readTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		if len(args) == 1 {
			b, err := client.Backend(ctx, args[0])
			if err != nil {
				return c.fail(err)
			}
			if c.opts.json {
				c.printJSON(b)
			} else {
				printBackend(c.stdout, b, time.Now(), colour(c.stdout))
			}
			if b.State != "healthy" {
				return exitNotHealthy
			}
			return exitOK
		}
		m, err := client.Manager(ctx)
		if err != nil {
			return c.fail(err)
		}
		refs, err := client.ListBackends(ctx)
		if err != nil {
			return c.fail(err)
		}
		out := statusJSON{Gateway: m, Backends: []dbusapi.BackendStatus{}}
		for _, ref := range refs {
			b, err := client.Backend(ctx, ref.Name)
			if dbusapi.ErrorName(err) == dbusapi.ErrorNoSuchBackend {
				continue // removed by a reload meanwhile
			}
			if err != nil {
				return c.fail(err)
			}
			out.Backends = append(out.Backends, b)
		}
		if profiles, err := client.ListProfiles(ctx); err == nil {
			out.Profiles = profiles
		} else if dbusapi.ErrorName(err) != "org.freedesktop.DBus.Error.UnknownMethod" {
			return c.fail(err)
		}
		if c.opts.json {
			c.printJSON(out)
		} else {
			printOverview(c.stdout, out, colour(c.stdout))
		}
		return exitOK
	})
}

func (c *cli) printJSON(v any) {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Colours of the state dot, as systemctl uses them.
const (
	ansiGreen  = "\x1b[0;1;32m"
	ansiYellow = "\x1b[0;1;33m"
	ansiRed    = "\x1b[0;1;31m"
	ansiReset  = "\x1b[0m"
)

// dot returns "●", coloured for state when colour is set.
func dot(state string, colour bool) string {
	const d = "●"
	if !colour {
		return d
	}
	switch state {
	case "healthy":
		return ansiGreen + d + ansiReset
	case "starting", "unhealthy":
		return ansiYellow + d + ansiReset
	case "failed":
		return ansiRed + d + ansiReset
	}
	return d
}

// printOverview prints the gateway's summary and one line per backend.
func printOverview(w io.Writer, s statusJSON, colour bool) {
	overall := "healthy"
	for _, b := range s.Backends {
		if b.State == "failed" {
			overall = "failed"
			break
		}
		if b.State != "healthy" && b.State != "stopped" && b.State != "idle" {
			overall = "starting"
		}
	}
	fmt.Fprintf(w, "%s mcpgate %s - %s\n", dot(overall, colour), s.Gateway.Version, s.Gateway.Status)
	fmt.Fprintf(w, "  Sessions: %d\n", s.Gateway.NSessions)
	if len(s.Backends) == 0 {
		fmt.Fprintln(w, "\nNo backends are configured.")
		return
	}
	// The dots stay out of the table: their colour codes would upset the
	// column widths.
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tSTATE\tERA\tPID\tRESTARTS\tTOOLS\tCIRCUIT\tIN FLIGHT\tQUEUED\tCHECK\tLAST ERROR")
	for _, b := range s.Backends {
		where := pid(b.MainPID)
		if b.URL != "" {
			where = b.URL // a remote backend has no process
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", b.Name, b.State, cmp.Or(b.Era, "-"), where, b.NRestarts, len(b.Tools),
			circuit(b), b.CallsInFlight, b.CallsQueued, checkLatency(b), oneLine(b.LastError))
	}
	tw.Flush()
	fmt.Fprintln(w)
	lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	for i, line := range lines {
		prefix := "  "
		if i > 0 {
			prefix = dot(s.Backends[i-1].State, colour) + " "
		}
		fmt.Fprintln(w, strings.TrimRight(prefix+line, " "))
	}
	printPendingSummary(w, s.Backends)
	printProfiles(w, s.Profiles)
}

// printBackend prints one backend like "systemctl status" prints a unit.
func printBackend(w io.Writer, b dbusapi.BackendStatus, now time.Time, colour bool) {
	fmt.Fprintf(w, "%s %s\n", dot(b.State, colour), b.Name)
	state := b.State
	if b.StateChangeTimestamp != 0 {
		since := time.UnixMicro(int64(b.StateChangeTimestamp))
		state += " since " + since.Format("Mon 2006-01-02 15:04:05 MST") + "; " + ago(now.Sub(since))
	}
	row := func(label, value string) { fmt.Fprintf(w, "%12s: %s\n", label, value) }
	row("State", state)
	if b.URL != "" {
		row("URL", b.URL)
	} else {
		row("Command", strings.Join(b.Command, " "))
		row("Main PID", pid(b.MainPID))
	}
	if b.Unit != "" {
		row("Unit", b.Unit)
	}
	if b.PeerPID != 0 {
		row("Peer", peerCred(b.PeerPID, b.PeerUID, b.PeerGID))
	}
	if b.ProtocolVersion != "" {
		row("Protocol", b.ProtocolVersion+" ("+b.Era+")")
	}
	if b.TokenExpiryTimestamp != 0 {
		exp := time.UnixMicro(int64(b.TokenExpiryTimestamp))
		when := "in " + now.Sub(exp).Abs().Round(time.Second).String()
		if exp.Before(now) {
			when = "expired " + ago(now.Sub(exp))
		}
		row("OAuth token", "expires "+exp.Format("Mon 2006-01-02 15:04:05 MST")+"; "+when)
	}
	// As systemctl status shows a unit's accounting: only what is known.
	if b.TasksCurrent != math.MaxUint64 {
		row("Tasks", strconv.FormatUint(b.TasksCurrent, 10))
	}
	if b.MemoryCurrent != math.MaxUint64 {
		row("Memory", iecBytes(b.MemoryCurrent))
	}
	if b.CPUUsageNSec != math.MaxUint64 {
		row("CPU", time.Duration(b.CPUUsageNSec).Round(time.Millisecond).String())
	}
	row("Restarts", strconv.Itoa(int(b.NRestarts)))
	tools := strconv.Itoa(len(b.Tools))
	if len(b.Tools) > 0 {
		const shown = 5 // "mcpgatectl tools" lists them all
		names := b.Tools
		more := ""
		if len(names) > shown {
			names, more = names[:shown], fmt.Sprintf(", … %d more", len(b.Tools)-shown)
		}
		tools += " (" + strings.Join(names, ", ") + more + ")"
	}
	row("Tools", tools)
	if b.CircuitOpenTimestamp != 0 {
		opened := time.UnixMicro(int64(b.CircuitOpenTimestamp))
		row("Circuit", "open since "+opened.Format("Mon 2006-01-02 15:04:05 MST")+"; "+ago(now.Sub(opened)))
	} else {
		row("Circuit", "closed")
	}
	health := "no check yet"
	if b.LastCheckTimestamp != 0 {
		health = fmt.Sprintf("last check took %s, %s; %d failed in a row", checkLatency(b),
			ago(now.Sub(time.UnixMicro(int64(b.LastCheckTimestamp)))), b.ConsecutiveFailures)
	}
	row("Health", health)
	row("Calls", fmt.Sprintf("%d in flight, %d queued; %d in all, %d failed, %d served by a fallback",
		b.CallsInFlight, b.CallsQueued, b.NCalls, b.NFailedCalls, b.NFallbacks))
	if b.LastExitStatus != 0 {
		row("Last exit", lastExit(b.LastExitCode, b.LastExitStatus))
	}
	lastError := "-"
	if b.LastError != "" {
		lastError = oneLine(b.LastError)
	}
	row("Last error", lastError)
	if b.NBytesProcessed > 0 {
		row("Output", outputSaving(b.NBytesProcessed, b.NBytesReturned))
		for _, t := range b.ToolOutputBytes {
			fmt.Fprintf(w, "%12s  %s: %s\n", "", t.Tool, outputSaving(t.Processed, t.Returned))
		}
	}
	if len(b.PendingChanges) > 0 {
		row("Integrity", pendingSummary(b))
	}
	printInstances(w, b, row)
	if len(b.StderrTail) > 0 {
		fmt.Fprintln(w)
		tail := b.StderrTail
		if len(tail) > 10 {
			tail = tail[len(tail)-10:]
		}
		for _, line := range tail {
			fmt.Fprintln(w, line)
		}
	}
}

// outputSaving describes what the output pipeline saved, as
// "1.2 MB in, 300 kB out (75.0% saved)".
func outputSaving(processed, returned uint64) string {
	saved := 0.0
	if processed > 0 && returned < processed {
		saved = 100 * float64(processed-returned) / float64(processed)
	}
	return fmt.Sprintf("%d bytes in, %d bytes out (%.1f%% saved)", processed, returned, saved)
}

// circuit names the state of a backend's circuit breaker.
func circuit(b dbusapi.BackendStatus) string {
	if b.CircuitOpenTimestamp != 0 {
		return "open"
	}
	return "closed"
}

// checkLatency is how long the last health check took, or "-".
func checkLatency(b dbusapi.BackendStatus) string {
	if b.LastCheckTimestamp == 0 {
		return "-"
	}
	return (time.Duration(b.LastCheckLatencyUSec) * time.Microsecond).String()
}

// iecBytes writes n as systemctl status does: 12.3M, 1.0G, 512B.
func iecBytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i:i+1]
}

func pid(p uint32) string {
	if p == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(p), 10)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// ago says how long ago d was, as systemctl does: "3min 5s ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dmin %ds ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dmin ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

func (c *cli) tools(_ []string) int {
	return c.withClient(readTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		tools, err := client.ListTools(ctx)
		if err != nil {
			return c.fail(err)
		}
		if c.opts.json {
			if tools == nil {
				tools = []dbusapi.Tool{}
			}
			c.printJSON(tools)
			return exitOK
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tBACKEND\tDESCRIPTION")
		for _, t := range tools {
			desc, _, _ := strings.Cut(t.Description, "\n")
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Backend, desc)
		}
		tw.Flush()
		return exitOK
	})
}

// printInstances lists the instances of a backend with instance =
// "session", one line each, the way systemctl lists a unit's processes.
func printInstances(w io.Writer, b dbusapi.BackendStatus, row func(label, value string)) {
	if len(b.Instances) == 0 {
		return
	}
	row("Instances", fmt.Sprintf("%d busy, %d idle", b.NBusy, b.NIdle))
	for _, in := range b.Instances {
		session := "idle"
		switch {
		case strings.Contains(in.Session, "-"): // a stateless request's identifier; a hash has none
			session = "request " + in.Session
		case in.Session != "":
			session = "session " + in.Session
		}
		fmt.Fprintf(w, "%14s%s  %s  %s  %s\n", "", in.Name, pid(in.PID), in.State, session)
	}
}

// lastExit says how a backend's last process ended, as systemd does:
// "exited with status 15" or "killed by SIGTERM". Without code (a daemon
// older than LastExitCode) the number alone is all there is.
func lastExit(code string, status int32) string {
	name := unix.SignalName(syscall.Signal(status))
	if name == "" {
		name = fmt.Sprintf("signal %d", status)
	}
	switch code {
	case "exited":
		return fmt.Sprintf("exited with status %d", status)
	case "killed":
		return "killed by " + name
	case "dumped":
		return "killed by " + name + " (core dumped)"
	}
	return strconv.Itoa(int(status))
}
