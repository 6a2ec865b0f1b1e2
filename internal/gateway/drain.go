package gateway

// Draining reports whether the gateway stopped accepting new sessions and
// requests (StopAccepting or Drain): the host is on its way down.
func (g *Gateway) Draining() bool { return g.draining.Load() }
