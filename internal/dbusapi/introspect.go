package dbusapi

import (
	"encoding/xml"
	"fmt"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
	"github.com/godbus/dbus/v5/prop"

	dbusxml "github.com/mcpgate/mcpgate/packaging/dbus"
)

// Interfaces returns the Manager and Backend interfaces as declared in
// packaging/dbus/org.mcpgate.Gateway1.xml, which is embedded.
func Interfaces() (manager, backend introspect.Interface, err error) {
	var node introspect.Node
	if err := xml.Unmarshal(dbusxml.Introspection, &node); err != nil {
		return manager, backend, fmt.Errorf("parse org.mcpgate.Gateway1.xml: %w", err)
	}
	found := 0
	for _, iface := range node.Interfaces {
		switch iface.Name {
		case ManagerInterface:
			manager = iface
			found++
		case BackendInterface:
			backend = iface
			found++
		}
	}
	if found != 2 || len(node.Interfaces) != 2 {
		return manager, backend, fmt.Errorf("org.mcpgate.Gateway1.xml must declare exactly %s and %s", ManagerInterface, BackendInterface)
	}
	return manager, backend, nil
}

// standardInterfaces are implemented by every object.
var standardInterfaces = []introspect.Interface{introspect.PeerData, introspect.IntrospectData, prop.IntrospectData}

// introspectable serves org.freedesktop.DBus.Introspectable for one object.
type introspectable struct {
	iface    introspect.Interface
	children func() []string // names of child nodes, or nil
}

// Introspect returns the object's introspection XML.
func (i introspectable) Introspect() (string, *dbus.Error) {
	node := introspect.Node{Interfaces: append(append([]introspect.Interface(nil), standardInterfaces...), i.iface)}
	if i.children != nil {
		for _, name := range i.children() {
			node.Children = append(node.Children, introspect.Node{Name: name})
		}
	}
	out, err := xml.MarshalIndent(node, "", " ")
	if err != nil {
		return "", dbus.MakeFailedError(err)
	}
	return introspect.IntrospectDeclarationString + string(out) + "\n", nil
}
