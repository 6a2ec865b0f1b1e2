module github.com/mcpgate/mcpgate/bench

go 1.26.0

require github.com/mcpgate/mcpgate v0.0.0

require (
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/godbus/dbus/v5 v5.2.4 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

// The profiling build of mcpgated is the checkout's.
replace github.com/mcpgate/mcpgate => ../
