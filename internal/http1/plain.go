package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// A plain request is one whose head is of the shape MCP clients send:
//
//   - the request line "METHOD /path HTTP/1.1", with one of the common
//     methods and a path of letters, digits and "-._~/";
//   - at most plainLines field lines "Name: value" ending in CRLF, each
//     name a token and given once, no value with a control byte other
//     than HTAB, no line folded;
//   - a Content-Length of digits; Connection "keep-alive" or "close";
//     none of Transfer-Encoding, Trailer and Pragma, to which net/http's
//     parser gives meaning.
//
// readPlain parses such a request in one pass over its head, with one
// string for all of its text and one allocation for the request, its URL
// and its values, where http.ReadRequest allocates a string per value, a
// textproto reader and a URL: about half the time, and 4 allocations
// against 18 (BenchmarkReadRequest). What it returns is the request
// http.ReadRequest would return, field for field (FuzzPlainIsReadRequest),
// except its Body, which reads the same bytes. Anything else, and a head
// not yet whole in the buffer, is left to http.ReadRequest, so that only
// this subset has a parser of its own.

// plainLines is how many field lines a plain request may have, and
// plainVals how many values it holds without an allocation of their own:
// Go's client sends 7 lines, Node's fetch 11.
const (
	plainLines = 64
	plainVals  = 12
)

// plainRequest is a plain request's parts, allocated together.
type plainRequest struct {
	req  http.Request
	url  url.URL
	vals [plainVals]string
}

// readPlain parses the plain request at the head of br and consumes its
// head; its body is read through body. It returns nil, having consumed
// nothing, for a request that is not plain or whose head is not whole in
// br's buffer.
func readPlain(br *bufio.Reader, body *plainBody) *http.Request {
	buf, _ := br.Peek(br.Buffered())

	// Where each line ends, up to the empty one that ends the head.
	var ends [1 + plainLines]int // the request line's, then the fields'
	lines, end := 0, 0
	for pos := 0; ; {
		i := bytes.IndexByte(buf[pos:], '\r')
		if i < 0 || pos+i+1 >= len(buf) || buf[pos+i+1] != '\n' {
			return nil
		}
		if i == 0 && lines > 0 {
			end = pos + 2
			break
		}
		if lines == len(ends) {
			return nil
		}
		ends[lines] = pos + i
		lines++
		pos += i + 2
	}

	// The request line.
	eol := ends[0]
	sp := bytes.IndexByte(buf[:eol], ' ')
	if sp < 0 {
		return nil
	}
	method := plainMethod(buf[:sp])
	pathEnd := sp + 1
	for pathEnd < eol && pathByte[buf[pathEnd]] {
		pathEnd++
	}
	if method == "" || pathEnd == sp+1 || buf[sp+1] != '/' || string(buf[pathEnd:eol]) != " HTTP/1.1" {
		return nil
	}

	p := new(plainRequest)
	vals := p.vals[:]
	if lines-1 > len(vals) {
		vals = make([]string, lines-1)
	}
	h := make(http.Header, lines-1)
	s := string(buf[:end]) // every string of the request is a part of this one
	var (
		length                      int64
		sawLength, sawConn, sawHost bool
		closeAfter                  bool
		host                        string
	)
	for l := 1; l < lines; l++ {
		pos, eol := ends[l-1]+2, ends[l]
		line := buf[pos:eol]
		// The name, a token, and whether it is in canonical form.
		colon, canonical, upper := 0, true, true
	name:
		for ; colon < len(line); colon++ {
			switch nameByte[line[colon]] {
			case 0:
				break name
			case nameLower:
				canonical = canonical && !upper
				upper = false
			case nameUpper:
				canonical = canonical && upper
				upper = false
			case nameDash:
				upper = true
			default:
				upper = false
			}
		}
		if colon == 0 || colon == len(line) || line[colon] != ':' {
			return nil
		}
		v0, v1 := colon+1, len(line)
		for v0 < v1 && (line[v0] == ' ' || line[v0] == '\t') {
			v0++
		}
		for v1 > v0 && (line[v1-1] == ' ' || line[v1-1] == '\t') {
			v1--
		}
		for _, c := range line[v0:v1] {
			if !valueByte[c] {
				return nil
			}
		}
		key := s[pos : pos+colon]
		if !canonical {
			key = canonicalKey(line[:colon])
		}
		val := s[pos+v0 : pos+v1]
		switch key {
		case "Content-Length":
			n, err := strconv.ParseUint(val, 10, 63) // as net/http parses it
			if err != nil || sawLength {
				return nil
			}
			length, sawLength = int64(n), true
		case "Host":
			if sawHost {
				return nil
			}
			host, sawHost = val, true
			continue // ReadRequest keeps it in Host only
		case "Connection":
			switch {
			case sawConn:
				return nil
			case equalFold(val, "keep-alive"):
			case equalFold(val, "close"):
				closeAfter = true
			default:
				return nil
			}
			sawConn = true
		case "Transfer-Encoding", "Trailer", "Pragma":
			return nil
		}
		// A name given twice is left to net/http, which joins the values.
		n := len(h)
		vals[l-1] = val
		h[key] = vals[l-1 : l : l]
		if len(h) == n {
			return nil
		}
	}

	target := s[sp+1 : pathEnd]
	p.url.Path = target
	p.req = http.Request{
		Method:        method,
		URL:           &p.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          http.NoBody,
		ContentLength: length,
		Close:         closeAfter,
		Host:          host,
		RequestURI:    target,
	}
	if length > 0 {
		body.r, body.n = br, length
		p.req.Body = body
	}
	br.Discard(end)
	return &p.req
}

// plainMethod returns the method named by b, if it is a common one.
func plainMethod(b []byte) string {
	switch string(b) {
	case http.MethodPost:
		return http.MethodPost
	case http.MethodGet:
		return http.MethodGet
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPut:
		return http.MethodPut
	case http.MethodPatch:
		return http.MethodPatch
	}
	return ""
}

// equalFold reports whether v is lower, ASCII letters in any case.
func equalFold(v, lower string) bool {
	if len(v) != len(lower) {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// canonicalKey returns the canonical form of the field name b, a token
// not in that form, as textproto makes it: an interned name if it is a
// common one, or else a new string.
func canonicalKey(b []byte) string {
	var kb [64]byte
	if len(b) > len(kb) {
		return http.CanonicalHeaderKey(string(b))
	}
	k := kb[:len(b)]
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
		upper = c == '-'
	}
	if v, ok := commonKeys[string(k)]; ok {
		return v
	}
	return string(k)
}

// commonKeys interns the names MCP clients send, so that a client that
// sends them in lower case, as Node's fetch does, costs no string each.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Connection", "Content-Length", "Content-Type",
		"Host", "Last-Event-Id", "Mcp-Method", "Mcp-Name",
		"Mcp-Protocol-Version", "Mcp-Session-Id", "Origin", "Referer",
		"Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Traceparent",
		"Tracestate", "User-Agent", "X-Forwarded-For", "Pragma",
		"Transfer-Encoding", "Trailer", "Expect",
	} {
		m[k] = k
	}
	return m
}()

// The classes of a field name's bytes (RFC 9110's tchar), for its
// canonical form; 0 is not a name's.
const (
	nameLower = 1 + iota
	nameUpper
	nameDash
	nameOther
)

// nameByte, valueByte and pathByte tell the bytes of a field name (for
// validFields too), of a field value and of a plain request's path.
var nameByte, valueByte, pathByte = func() (name [256]byte, value, path [256]bool) {
	for c := 0; c < 256; c++ {
		value[c] = c >= ' ' && c != 0x7f || c == '\t'
	}
	for c := '0'; c <= '9'; c++ {
		name[c], path[c] = nameOther, true
	}
	for c := 'a'; c <= 'z'; c++ {
		name[c], path[c] = nameLower, true
		name[c-'a'+'A'], path[c-'a'+'A'] = nameUpper, true
	}
	for _, c := range "!#$%&'*+.^_`|~" {
		name[c] = nameOther
	}
	name['-'] = nameDash
	for _, c := range "-._~/" {
		path[c] = true
	}
	return
}()

// plainBody is a plain request's body: the next n bytes of r.
type plainBody struct {
	r *bufio.Reader
	n int64
}

// Read reads from the body; like net/http's, it reports io.EOF with the
// last bytes, and io.ErrUnexpectedEOF if the client stops before them.
func (b *plainBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	switch {
	case b.n == 0:
		err = io.EOF
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *plainBody) Close() error { return nil }
