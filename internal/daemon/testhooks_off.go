//go:build !mcpgate_testhooks

package daemon

import "context"

// testHooks returns the channel that wedges the main loop: in a production
// build, which carries no test hooks, nil, which never becomes ready. Test
// builds (-tags mcpgate_testhooks) have the hooks in testhooks_on.go.
func (d *daemon) testHooks(context.Context) <-chan struct{} { return nil }
