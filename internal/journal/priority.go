package journal

import (
	"log/slog"
	"strings"
)

// Syslog priorities as used in the journal's PRIORITY field.
const (
	PriEmerg   = 0
	PriAlert   = 1
	PriCrit    = 2
	PriErr     = 3
	PriWarning = 4
	PriNotice  = 5
	PriInfo    = 6
	PriDebug   = 7
)

// slog levels for the syslog priorities slog has no name for. Records at
// these levels get the matching PRIORITY from Handler and a readable level
// name from the text handler NewOutput makes.
const (
	LevelNotice    = slog.LevelInfo + 2
	LevelCritical  = slog.LevelError + 4
	LevelAlert     = slog.LevelError + 8
	LevelEmergency = slog.LevelError + 12
)

// LevelPriority maps an slog level to a syslog priority: below Info is debug
// (7), below LevelNotice info (6), below Warn notice (5), below Error warning
// (4), below LevelCritical err (3), below LevelAlert crit (2), below
// LevelEmergency alert (1), and from LevelEmergency up emerg (0).
func LevelPriority(l slog.Level) int {
	switch {
	case l < slog.LevelInfo:
		return PriDebug
	case l < LevelNotice:
		return PriInfo
	case l < slog.LevelWarn:
		return PriNotice
	case l < slog.LevelError:
		return PriWarning
	case l < LevelCritical:
		return PriErr
	case l < LevelAlert:
		return PriCrit
	case l < LevelEmergency:
		return PriAlert
	default:
		return PriEmerg
	}
}

// levelName names the extra levels for text output; ok is false for levels
// slog names well itself.
func levelName(l slog.Level) (name string, ok bool) {
	switch l {
	case LevelNotice:
		return "NOTICE", true
	case LevelCritical:
		return "CRITICAL", true
	case LevelAlert:
		return "ALERT", true
	case LevelEmergency:
		return "EMERGENCY", true
	}
	return "", false
}

// maxLevelWord is the length of the longest level word ParsePriority knows.
const maxLevelWord = len("EMERGENCY")

// levelWordPriority maps an upper-case level word to its priority.
func levelWordPriority(word []byte) (int, bool) {
	switch string(word) { // no allocation: the compiler compares in place
	case "EMERG", "EMERGENCY", "PANIC":
		return PriEmerg, true
	case "ALERT":
		return PriAlert, true
	case "CRIT", "CRITICAL", "FATAL":
		return PriCrit, true
	case "ERR", "ERROR":
		return PriErr, true
	case "WARN", "WARNING":
		return PriWarning, true
	case "NOTICE":
		return PriNotice, true
	case "INFO":
		return PriInfo, true
	case "DEBUG", "TRACE":
		return PriDebug, true
	}
	return 0, false
}

// ParsePriority finds the syslog priority of one line a backend wrote to
// stderr. Rules, first match wins:
//
//   - A leading "<N>" (sd-daemon(3) style, N = 0…7) sets the priority and is
//     stripped from msg. As in journald's own stream parser, a syslog
//     "<facility*8+N>" prefix of up to three digits is accepted too and only
//     N is used.
//   - A leading level word, case-insensitive, bare ("ERROR something"),
//     followed by a colon ("error: something"), or in brackets
//     ("[WARN] something", "[warn]: something"), maps to its priority:
//     EMERG/EMERGENCY/PANIC 0, ALERT 1, CRIT/CRITICAL/FATAL 2, ERR/ERROR 3,
//     WARN/WARNING 4, NOTICE 5, INFO 6, DEBUG/TRACE 7. The word has to end
//     there ("Errors" or "INFO_x" do not match) and stays in msg.
//   - Otherwise the priority is 6 (info) and msg is line.
//
// msg shares line's memory.
func ParsePriority(line []byte) (prio int, msg []byte) {
	if p, n, ok := syslogPrefix(line); ok {
		return p, line[n:]
	}
	if p, ok := levelWordPrefix(line); ok {
		return p, line
	}
	return PriInfo, line
}

// syslogPrefix parses "<N>", "<NN>" or "<NNN>" (at most 191, the largest
// facility/priority combination) and returns the priority and prefix length.
func syslogPrefix(line []byte) (prio, n int, ok bool) {
	if len(line) < 3 || line[0] != '<' {
		return 0, 0, false
	}
	v := 0
	i := 1
	for ; i < len(line) && i <= 3 && isDigit(line[i]); i++ {
		v = v*10 + int(line[i]-'0')
	}
	if i == 1 || i >= len(line) || line[i] != '>' || v > 191 {
		return 0, 0, false
	}
	return v & 7, i + 1, true
}

func levelWordPrefix(line []byte) (int, bool) {
	s := line
	bracket := len(s) > 0 && s[0] == '['
	if bracket {
		s = s[1:]
	}
	var word [maxLevelWord]byte
	n := 0
	for n < len(s) && isASCIILetter(s[n]) {
		if n == maxLevelWord {
			return 0, false
		}
		word[n] = s[n] &^ 0x20 // upper-case an ASCII letter
		n++
	}
	if n == 0 {
		return 0, false
	}
	p, ok := levelWordPriority(word[:n])
	if !ok {
		return 0, false
	}
	rest := s[n:]
	if bracket {
		return p, len(rest) > 0 && rest[0] == ']'
	}
	return p, len(rest) == 0 || rest[0] == ':' || rest[0] == ' ' || rest[0] == '\t'
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// MCPLevel maps a Model Context Protocol logging level (the "level" of a
// notifications/message, RFC 5424 names) to an slog level such that
// LevelPriority gives its syslog priority: debug 7, info 6, notice 5,
// warning 4, error 3, critical 2, alert 1, emergency 0. Matching is
// case-insensitive; ok is false for any other string, which maps to Info.
func MCPLevel(level string) (l slog.Level, ok bool) {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "notice":
		return LevelNotice, true
	case "warning":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	case "critical":
		return LevelCritical, true
	case "alert":
		return LevelAlert, true
	case "emergency":
		return LevelEmergency, true
	}
	return slog.LevelInfo, false
}

// MCPLevelPriority maps an MCP logging level to a syslog priority, debug 7
// … emergency 0 (see MCPLevel); unknown levels give 6 (info) and ok false.
func MCPLevelPriority(level string) (prio int, ok bool) {
	l, ok := MCPLevel(level)
	return LevelPriority(l), ok
}
