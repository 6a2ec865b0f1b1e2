package http1

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// bufferBody is how much of a body waits for the handler to return, so
// that it goes out with a Content-Length; a larger body, or one flushed
// before, is chunked.
const bufferBody = 4 << 10

// response is the http.ResponseWriter of a connection, reset for each of
// its requests.
type response struct {
	c        *conn
	req      *http.Request
	header   http.Header
	status   int   // 0 until WriteHeader or the first Write
	sent     bool  // the status line and header are in the write buffer
	chunked  bool  // the body goes out in chunks
	declared int64 // the Content-Length the handler set, or -1
	written  int64 // body bytes accepted from the handler
	buf      []byte
	err      error // the first failed write; later ones fail with it
	failed   bool  // the handler panicked: nothing more is written
	closing  bool  // Connection: close was sent
}

var (
	_ http.ResponseWriter = (*response)(nil)
	_ http.Flusher        = (*response)(nil)
)

func (w *response) reset(req *http.Request) {
	w.req = req
	clear(w.header)
	w.status, w.sent, w.chunked, w.declared, w.written = 0, false, false, -1, 0
	w.buf, w.err, w.failed, w.closing = w.buf[:0], nil, false, false
}

// Header returns the header to send; changes after the first Write or
// Flush are ignored, as with net/http.
func (w *response) Header() http.Header { return w.header }

// WriteHeader sets the status; the header goes out with the body or on
// Flush. Informational statuses (1xx) go out at once.
func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.status != 0 || w.failed {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.c.bw.WriteString(statusLine(code))
		w.writeFields()
		w.c.bw.WriteString("\r\n")
		w.err = w.c.bw.Flush()
		return
	}
	w.status = code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.declared = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *response) bodyAllowed() bool {
	return w.status >= 200 && w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

// Write buffers p, or sends it once the header is out or the buffer would
// overflow; a large p goes to the connection without being copied.
func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case w.failed:
		return 0, http.ErrAbortHandler
	case w.err != nil:
		return 0, w.err
	case !w.bodyAllowed():
		return 0, http.ErrBodyNotAllowed
	case w.declared >= 0 && w.written+int64(len(p)) > w.declared:
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	if !w.sent && w.declared < 0 && len(w.buf)+len(p) <= bufferBody {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if !w.sent {
		w.start(false, p)
	}
	w.writeBody(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush sends the header and what is buffered to the client.
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush reporting whether the bytes reached the
// connection; http.ResponseController uses it.
func (w *response) FlushError() error {
	if w.failed {
		return http.ErrAbortHandler
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.start(false, nil)
	}
	if w.err == nil {
		w.err = w.c.bw.Flush()
	}
	return w.err
}

// finish completes the response once the handler returned.
func (w *response) finish() {
	if w.failed {
		return
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case !w.sent:
		w.start(true, nil)
	case w.chunked:
		if w.err == nil {
			_, w.err = w.c.bw.WriteString("0\r\n\r\n")
		}
	}
	if w.declared >= 0 && w.written < w.declared && w.req.Method != http.MethodHead {
		w.closing = true // the client waits for bytes that will not come
	}
}

// start sends the header and the buffered body; final and next are
// sendHeader's.
func (w *response) start(final bool, next []byte) {
	w.sendHeader(final, next)
	w.writeBody(w.buf)
	w.buf = w.buf[:0]
}

func (w *response) writeBody(p []byte) {
	if len(p) == 0 || w.err != nil {
		return
	}
	bw := w.c.bw
	if w.chunked {
		bw.Write(append(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16), '\r', '\n'))
		bw.Write(p)
		_, w.err = bw.WriteString("\r\n")
		return
	}
	_, w.err = bw.Write(p)
}

// sendHeader writes the status line and the header. final says the
// handler returned, so the buffered body is all of it; next is what the
// handler writes after the buffer, if it was not final.
func (w *response) sendHeader(final bool, next []byte) {
	w.sent = true
	bw := w.c.bw
	if _, ok := w.header["Content-Type"]; !ok && w.bodyAllowed() && w.written > 0 {
		sniff := w.buf
		if len(sniff) == 0 {
			sniff = next
		}
		w.header.Set("Content-Type", http.DetectContentType(sniff))
	}
	delete(w.header, "Transfer-Encoding") // framing is the server's
	// A body the handler left is read past now, before the answer, as
	// net/http does: a client may send all of it before it reads. One too
	// large to read past ends the connection, and the client is told.
	w.closing = w.c.closeAfter || w.c.srv.inShut.Load() || !w.c.body.drain() || hasToken(w.header.Get("Connection"), "close")
	delete(w.header, "Connection")
	bw.WriteString(statusLine(w.status))
	w.writeFields()
	if _, ok := w.header["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.Write(w.c.srv.date())
		bw.WriteString("\r\n")
	}
	switch {
	case !w.bodyAllowed() || w.declared >= 0:
	case final:
		if w.written > 0 || w.req.Method != http.MethodHead {
			bw.WriteString("Content-Length: ")
			bw.Write(strconv.AppendInt(bw.AvailableBuffer(), w.written, 10))
			bw.WriteString("\r\n")
		}
	case w.req.ProtoAtLeast(1, 1):
		w.chunked = true
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	default:
		w.closing = true // an HTTP/1.0 body ends with the connection
	}
	switch {
	case w.closing:
		bw.WriteString("Connection: close\r\n")
	case !w.req.ProtoAtLeast(1, 1):
		bw.WriteString("Connection: keep-alive\r\n") // HTTP/1.0 asked for it
	}
	_, w.err = bw.WriteString("\r\n")
}

// writeFields writes the handler's header fields, a line break inside a
// value turned into a space as net/http does.
func (w *response) writeFields() {
	bw := w.c.bw
	for k, vv := range w.header {
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			bw.WriteString(strings.TrimSpace(v))
			bw.WriteString("\r\n")
		}
	}
}

func statusLine(code int) string {
	switch code {
	case http.StatusOK:
		return "HTTP/1.1 200 OK\r\n"
	case http.StatusAccepted:
		return "HTTP/1.1 202 Accepted\r\n"
	}
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	return "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
}

// hasToken reports whether the comma-separated list v names token.
func hasToken(v, token string) bool {
	for f := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), token) {
			return true
		}
	}
	return false
}

// dateLine is the Date header's value for one second.
type dateLine struct {
	sec  int64
	text []byte
}

// date returns the Date header's value now, formatted once a second.
func (s *Server) date() []byte {
	now := time.Now()
	if d := s.dates.Load(); d != nil && d.sec == now.Unix() {
		return d.text
	}
	d := &dateLine{sec: now.Unix(), text: now.UTC().AppendFormat(nil, http.TimeFormat)}
	s.dates.Store(d)
	return d.text
}
