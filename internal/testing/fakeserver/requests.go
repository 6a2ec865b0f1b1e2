package main

import (
	"encoding/json"
	"fmt"
	"sync"
)

// toolRequests sends several requests to the client in one write, so
// that all of them are in flight before any is answered, and answers with
// every answer, in the order of the requests; with wait_cancel, it gets
// the answers and then waits for its own cancellation, never answering.
func (s *server) toolRequests(c *call) (any, error) {
	var a struct {
		Requests []struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"requests"`
		WaitCancel bool `json:"wait_cancel"`
	}
	if err := c.decodeArgs(&a); err != nil {
		return nil, err
	}
	if len(a.Requests) == 0 {
		return nil, invalidParams("requests needs at least one request")
	}
	chans := make([]chan *message, len(a.Requests))
	var lines []byte
	s.mu.Lock()
	for i, r := range a.Requests {
		id := fmt.Appendf(nil, `"fakeserver-%d"`, s.nextID.Add(1))
		chans[i] = make(chan *message, 1)
		s.pending[idKey(id)] = chans[i]
		lines = fmt.Appendf(lines, `{"jsonrpc":"2.0","id":%s,"method":%s`, id, quote(r.Method))
		if len(r.Params) > 0 {
			lines = fmt.Appendf(lines, `,"params":%s`, r.Params)
		}
		lines = append(lines, "}\n"...)
	}
	s.mu.Unlock()
	s.writeLine(lines[:len(lines)-1])
	answers := make([]map[string]json.RawMessage, len(chans))
	var wg sync.WaitGroup
	for i, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case m := <-ch:
				if m.Error != nil {
					answers[i] = map[string]json.RawMessage{"error": m.Error}
				} else {
					answers[i] = map[string]json.RawMessage{"result": m.Result}
				}
			case <-s.eof:
			}
		}()
	}
	wg.Wait()
	if a.WaitCancel {
		return s.toolWaitCancel(c)
	}
	for _, ans := range answers {
		if ans == nil {
			return nil, errNoReply // stdin ended before every answer came
		}
	}
	return textResult(fmt.Sprintf("%d answers", len(answers)), map[string]any{"answers": answers}), nil
}
