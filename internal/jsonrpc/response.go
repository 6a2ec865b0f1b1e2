package jsonrpc

import "encoding/json"

// ResponseError returns the error member of the response msg, nil when it
// carries a result (or is no response). The top-level members are read in
// order up to the first result or error member, as responses are written,
// so a large result is not walked.
func ResponseError(msg []byte) json.RawMessage {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return nil
	}
	i++
	for {
		i = skipSpace(msg, i)
		if i < len(msg) && msg[i] == ',' {
			i = skipSpace(msg, i+1)
		}
		if i >= len(msg) || msg[i] == '}' {
			return nil
		}
		keyEnd, err := skipString(msg, i)
		if err != nil {
			return nil
		}
		key := msg[i+1 : keyEnd-1]
		i = skipSpace(msg, keyEnd)
		if i >= len(msg) || msg[i] != ':' {
			return nil
		}
		i = skipSpace(msg, i+1)
		switch string(key) {
		case "result":
			return nil
		case "error":
			end, err := skipValue(msg, i)
			if err != nil {
				return nil
			}
			return json.RawMessage(msg[i:end])
		}
		end, err := skipValue(msg, i)
		if err != nil {
			return nil
		}
		i = end
	}
}
