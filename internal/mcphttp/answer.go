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
	defer resp.Body.Close()
	pending := map[string]json.RawMessage{}
	for _, id := range ids {
		pending[string(id)] = id
	}
	answered := func(msg []byte) {
		deliver(msg)
		if len(pending) > 0 {
			markAnswered(msg, pending)
		}
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
		es := NewEventReader(resp.Body, max)
		for len(pending) > 0 || len(ids) == 0 {
			var data []byte
			if data, err = es.Message(); err != nil {
				break
			}
			answered(data)
		}
		var tooLarge *EventTooLargeError
		switch {
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("%s ended the event stream before answering", peer)
		case errors.As(err, &tooLarge):
			err = fmt.Errorf("%s sent %w", peer, err)
		}
	default:
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
		switch body = bytes.TrimSpace(body); {
		case len(body) > max:
			err = fmt.Errorf("%s sent %w", peer, &EventTooLargeError{Max: max, Head: bytes.Clone(body[:min(len(body), headBytes)])})
		case len(body) > 0 && err == nil:
			answered(body)
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
