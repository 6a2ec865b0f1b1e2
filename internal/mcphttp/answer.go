package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ReadAnswer passes every message of a server's answer to a POST to
// deliver, and closes its body. It returns the ids of the requests the
// answer carried no response for and, when there are any or the server
// refused the message, why. peer names the server in errors.
func ReadAnswer(resp *http.Response, ids []json.RawMessage, max int, peer string, deliver func([]byte)) ([]json.RawMessage, error) {
	return ReadAnswerRoom(resp, ids, max, 0, peer, func(buf []byte, room int) { deliver(buf[room:]) })
}

// ReadAnswerRoom is ReadAnswer for a reader that answers in place: each
// message is read into a buffer of its own, with at least room spare
// bytes before it, and deliver gets the buffer and where the message
// starts in it (room or more). A JSON answer with a Content-Length is
// read into a buffer of exactly that size plus room, and an event of an
// event stream with one grows at most once past 64 KiB, to what the
// stream can still hold: a large message is held once, never as a grown
// buffer beside the one it outgrew, and never copied to make room.
func ReadAnswerRoom(resp *http.Response, ids []json.RawMessage, max, room int, peer string, deliver func(buf []byte, at int)) ([]json.RawMessage, error) {
	defer resp.Body.Close()
	pending := map[string]json.RawMessage{}
	for _, id := range ids {
		pending[string(id)] = id
	}
	answered := func(buf []byte, at int) {
		msg := buf[at:]
		if len(pending) > 0 {
			markAnswered(msg, pending) // before deliver, which may move msg's bytes
		}
		deliver(buf, at)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var err error
	switch {
	case resp.StatusCode == http.StatusAccepted:
		// Notifications and responses; a request only when it was
		// cancelled, and then the client expects no response.
		Discard(resp)
		return nil, nil
	case resp.StatusCode/100 != 2:
		return ids, HTTPError(resp, peer)
	case mediaType == MediaSSE:
		body := &countingReader{r: resp.Body}
		var sized func() int
		if resp.ContentLength > 0 {
			// What is left, and what the scanner may hold unread.
			sized = func() int { return int(resp.ContentLength-body.n) + chunkBytes }
		}
		es := NewEventReaderRoom(body, max, room, sized)
		for len(pending) > 0 || len(ids) == 0 {
			var buf []byte
			var at int
			if buf, at, err = es.MessageRoom(); err != nil {
				break
			}
			answered(buf, at)
		}
		var tooLarge *EventTooLargeError
		switch {
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("%s ended the event stream before answering", peer)
		case errors.As(err, &tooLarge):
			err = fmt.Errorf("%s sent %w", peer, err)
		}
	default:
		var buf []byte
		var tooLarge bool
		buf, tooLarge, err = readBody(resp, max, room)
		at := len(buf) - len(bytes.TrimLeft(buf[room:], jsonSpace))
		buf = bytes.TrimRight(buf, jsonSpace)
		if at > len(buf) { // nothing but whitespace
			at = len(buf)
		}
		switch body := buf[at:]; {
		case tooLarge:
			err = fmt.Errorf("%s sent %w", peer, &EventTooLargeError{Max: max, Head: bytes.Clone(body[:min(len(body), headBytes)])})
		case len(body) > 0 && err == nil:
			answered(buf, at)
		}
		if err == nil {
			err = fmt.Errorf("%s's answer held no response", peer)
		}
	}
	if len(pending) == 0 {
		return nil, nil
	}
	missing := make([]json.RawMessage, 0, len(pending))
	for _, id := range ids {
		if _, ok := pending[string(id)]; ok {
			missing = append(missing, id)
		}
	}
	return missing, err
}

// jsonSpace is what JSON counts as whitespace around a value.
const jsonSpace = " \t\r\n"

// readBody reads a JSON answer into a buffer with room spare bytes before
// it: of exactly its size when it has a Content-Length, else grown as it
// comes. An answer of more than max bytes is not read: tooLarge is set,
// and the buffer holds its first bytes, for the error.
func readBody(resp *http.Response, max, room int) (buf []byte, tooLarge bool, err error) {
	if n := resp.ContentLength; n > int64(max) {
		buf = make([]byte, room+headBytes)
		k, err := io.ReadFull(resp.Body, buf[room:])
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = nil
		}
		return buf[:room+k], true, err
	} else if n > 0 { // 0: none, or a response made by hand without one

		buf = make([]byte, room+int(n))
		_, err = io.ReadFull(resp.Body, buf[room:])
		return buf, false, err
	}
	buf = make([]byte, room, room+512)
	for {
		if len(buf) == cap(buf) { // doubled: fewer copies than append's growth
			grown := make([]byte, len(buf), min(2*cap(buf), room+max+1))
			copy(grown, buf)
			buf = grown
		}
		k, err := resp.Body.Read(buf[len(buf):min(cap(buf), room+max+1)])
		buf = buf[:len(buf)+k]
		switch {
		case len(buf)-room > max:
			return buf, true, nil
		case errors.Is(err, io.EOF):
			return buf, false, nil
		case err != nil:
			return buf, false, err
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// markAnswered removes from pending the ids msg (a message or a batch)
// responds to.
func markAnswered(msg []byte, pending map[string]json.RawMessage) {
	items := []json.RawMessage{msg}
	if jsonrpc.IsBatch(msg) {
		items, _ = jsonrpc.ParseBatch(msg)
	}
	for _, item := range items {
		// A request to the client has an id too; only responses count.
		if _, _, isRequest := jsonrpc.Lookup(item, "method"); isRequest {
			continue
		}
		if id, _, ok := jsonrpc.Lookup(item, "id"); ok {
			delete(pending, string(id))
		}
	}
}

// HTTPError turns a refusal into an error: the server's own JSON-RPC
// error when its body holds one, else the HTTP status and body. It
// reads the body but does not close it.
func HTTPError(resp *http.Response, peer string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if msg, err := jsonrpc.Parse(body); err == nil && msg.Error != nil {
		return jsonrpc.DecodeError(msg.Error)
	}
	text := string(bytes.TrimSpace(body))
	if len(text) > 512 {
		text = text[:512] + "…"
	}
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	return &StatusError{Code: resp.StatusCode, Err: fmt.Errorf("%s answered HTTP %d: %s", peer, resp.StatusCode, text)}
}

// StatusError is a refusal with an HTTP status and no JSON-RPC error.
type StatusError struct {
	Code int
	Err  error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// Discard reads the rest of a body so its connection can be reused, and
// closes it.
func Discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
