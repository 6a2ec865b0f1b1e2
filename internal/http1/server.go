// Package http1 serves an http.Handler over HTTP/1.1 with less work per
// request than net/http's server, for the front's hot path.
//
// It hands the handler the standard types, so handlers cannot tell the
// difference. What it does differently:
//
//   - The heads MCP clients send are parsed in one pass, without net/http's
//     parser but into the request it would build (readPlain); every other
//     request is parsed by net/http's own parser (http.ReadRequest).
//   - net/http starts a goroutine per request that reads ahead to notice a
//     client that went away, and stops it again once the handler is done:
//     a goroutine, a read(2) that finds nothing and two wake-ups per
//     request. Here a request gets that watch only once its handler has
//     run for WatchAfter: short calls never pay for it, long calls and
//     event streams still see their context cancelled when the client
//     leaves.
//   - net/http moves the connection's read deadline up to six times per
//     request; here it moves twice (the idle wait, then the request).
//   - A response that is complete when the handler returns goes out with
//     a Content-Length in one write; a flushed or large one is chunked, as
//     net/http would.
package http1

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves Handler on the listeners given to Serve. Its fields must
// not change once Serve was called.
type Server struct {
	Handler http.Handler
	// ConnContext, if set, derives the context of a connection's requests
	// from the connection, as http.Server's field of that name does.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// ReadTimeout bounds reading a request, its header and body, from its
	// first byte. Zero means no bound.
	ReadTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection; zero means ReadTimeout, and both zero no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and header; zero means
	// http.DefaultMaxHeaderBytes (1 MiB).
	MaxHeaderBytes int
	// WatchAfter is how long a handler runs before its connection is
	// watched for the client going away; zero means 50ms.
	WatchAfter time.Duration
	// ErrorLog receives handler panics and accept errors; nil means the
	// log package's standard logger.
	ErrorLog *log.Logger

	mu        sync.Mutex
	listeners map[*net.Listener]struct{}
	conns     map[*conn]struct{}
	gone      chan struct{} // signalled when a connection ends, for Shutdown
	inShut    atomic.Bool   // Shutdown or Close was called
	// handingOver is set by Handover: connections accepted meanwhile are
	// still served (see handover.go).
	handingOver atomic.Bool
	dates       atomic.Pointer[dateLine]
}

// ErrServerClosed is what Serve returns after Shutdown or Close: it is
// net/http's, so callers check for one error whichever server runs.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on l and serves each in its own goroutine
// until Shutdown or Close, when it returns ErrServerClosed; l is closed
// then. Any other accept error ends Serve with that error, except
// temporary ones (such as running out of file descriptors), after which
// it waits a little and accepts again.
func (s *Server) Serve(l net.Listener) error {
	if !s.track(&l, true) {
		l.Close()
		return ErrServerClosed
	}
	defer s.track(&l, false)
	var wait time.Duration
	for {
		rw, err := l.Accept()
		if err != nil {
			if s.inShut.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				wait = min(max(2*wait, 5*time.Millisecond), time.Second)
				s.logf("http1: accept error: %v; retrying in %v", err, wait)
				time.Sleep(wait)
				continue
			}
			return err
		}
		wait = 0
		c := s.newConn(rw)
		if !s.trackConn(c, true) {
			rw.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// track adds l to the listeners Shutdown and Close close, or removes it;
// adding fails once they were called.
func (s *Server) track(l *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return updateSet(&s.listeners, l, add, s.inShut.Load())
}

// trackConn adds c to the connections Shutdown waits for and Close
// closes, or removes it and tells a waiting Shutdown; adding fails once
// they were called.
func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := updateSet(&s.conns, c, add, s.inShut.Load() && !s.handingOver.Load())
	if !add && s.gone != nil {
		select {
		case s.gone <- struct{}{}:
		default:
		}
	}
	return ok
}

// updateSet adds k to *set, made on first use, unless closed, or removes
// it; it reports false for an add refused.
func updateSet[K comparable](set *map[K]struct{}, k K, add, closed bool) bool {
	switch {
	case !add:
		delete(*set, k)
	case closed:
		return false
	case *set == nil:
		*set = map[K]struct{}{k: {}}
	default:
		(*set)[k] = struct{}{}
	}
	return true
}

// closeListenersLocked stops accepting; s.mu must be held.
func (s *Server) closeListenersLocked() {
	for l := range s.listeners {
		(*l).Close()
	}
}

// Shutdown stops accepting, closes idle connections and waits for the
// others to finish their request, until ctx ends: then it returns
// ctx.Err() and leaves the rest to Close.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.shutdown(ctx, nil)
}

// shutdown is Shutdown, and Handover with streaming: it returns once no
// connection is left but those handling a request streaming reports
// true for (none, for streaming nil), or when ctx ends.
func (s *Server) shutdown(ctx context.Context, streaming func(*http.Request) bool) error {
	s.inShut.Store(true)
	s.mu.Lock()
	s.closeListenersLocked()
	if s.gone == nil {
		s.gone = make(chan struct{}, 1)
	}
	gone := s.gone
	s.mu.Unlock()
	for {
		s.mu.Lock()
		waiting := 0
		for c := range s.conns {
			c.closeIfIdle()
			if streaming == nil {
				waiting++
				continue
			}
			c.mu.Lock()
			if !(c.handling && c.req != nil && streaming(c.req)) {
				waiting++
			}
			c.mu.Unlock()
		}
		s.mu.Unlock()
		if waiting == 0 {
			return nil
		}
		select {
		case <-gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting and closes every connection at once; the
// contexts of requests in flight are cancelled.
func (s *Server) Close() error {
	s.handingOver.Store(false)
	s.inShut.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeListenersLocked()
	for c := range s.conns {
		c.close()
	}
	return nil
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

func (s *Server) watchAfter() time.Duration {
	if s.WatchAfter > 0 {
		return s.WatchAfter
	}
	return 50 * time.Millisecond
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}

// badRequest writes a refusal of a request that could not be read and
// asks the client to close, as net/http's server does. why may quote the
// client's bytes (the parser's error does): it is cut short, and the
// answer is plain text a browser must not sniff.
func badRequest(c net.Conn, status int, why string) {
	text := http.StatusText(status)
	if why != "" {
		text += ": " + why
	}
	if len(text) > 200 {
		text = strings.ToValidUTF8(text[:200], "") + "..."
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(text), text)
}
