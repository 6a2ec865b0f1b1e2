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

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
