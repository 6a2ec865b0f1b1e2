package http1

import (
	"context"
	"net/http"
)

// Handover is Shutdown for a process that hands its listening sockets to
// another (a re-exec): it stops accepting, closes the idle connections,
// serves the connections accepted until then their first request (a
// client that connected just before must not see a reset), and returns
// once every connection is gone or handles a request streaming reports
// true for (an event stream, which a Close then ends), or when ctx ends.
// Every response but those is written in full before its connection
// closes, as after Shutdown.
func (s *Server) Handover(ctx context.Context, streaming func(*http.Request) bool) error {
	s.handingOver.Store(true)
	return s.shutdown(ctx, streaming)
}

// changed tells a waiting Handover that a connection started a request.
func (s *Server) changed() {
	if !s.handingOver.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone != nil {
		select {
		case s.gone <- struct{}{}:
		default:
		}
	}
}
