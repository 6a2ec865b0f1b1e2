// Package dbus holds mcpgate's D-Bus files; Go code imports it for the introspection data it embeds.
package dbus

import _ "embed"

// Introspection is org.mcpgate.Gateway1.xml: the Manager and Backend
// interfaces as mcpgated exports them and as they are installed for
// documentation tools, the one source of truth for both.
//
//go:embed org.mcpgate.Gateway1.xml
var Introspection []byte
