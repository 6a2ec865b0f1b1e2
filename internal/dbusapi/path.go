package dbusapi

import (
	"strings"

	"github.com/godbus/dbus/v5"
)

// BackendPath returns the object path of the named backend: BackendPathPrefix
// and the name escaped as systemd's bus_path_encode escapes a label. ASCII
// letters stay, digits stay unless leading, every other byte becomes "_"
// and two lower-case hex digits, and "" becomes "_": "my-server" →
// my_2dserver, "7z" → _37z.
func BackendPath(name string) dbus.ObjectPath {
	return dbus.ObjectPath(BackendPathPrefix + escapeLabel(name))
}

// BackendName returns the backend name encoded in path, or false when path
// is not a backend path.
func BackendName(path dbus.ObjectPath) (string, bool) {
	label, ok := strings.CutPrefix(string(path), BackendPathPrefix)
	if !ok || label == "" || strings.Contains(label, "/") {
		return "", false
	}
	return unescapeLabel(label)
}

func escapeLabel(s string) string {
	if s == "" {
		return "_"
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlpha(c) || (i > 0 && isDigit(c)) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

func unescapeLabel(s string) (string, bool) {
	if s == "_" {
		return "", true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func unhex(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
