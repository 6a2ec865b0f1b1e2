// Command benchecho is the stdio MCP server of the benchmark: it answers
// tools/call by splicing the argument's bytes into the result, never
// decoding JSON, so that the backend hides none of a gateway's cost.
//
// Tools: echo {text} returns text; blob {bytes} returns a text of that many
// bytes (the large-result scenario).
//
// With -http ADDR or -unix PATH it serves the same answers as a remote
// backend instead: Streamable HTTP at /mcp on a TCP address or a unix
// socket, each answer one JSON body with its Content-Length, no session.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/mcpgate/mcpgate/bench/internal/splice"
)

const tools = `{"tools":[` +
	`{"name":"echo","description":"Returns text unchanged.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},` +
	`{"name":"blob","description":"Returns a text of the given number of bytes.","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}}]}`

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP at /mcp on the TCP `address` instead of stdio")
	socket := flag.String("unix", "", "serve Streamable HTTP at /mcp on the unix socket `path` instead of stdio")
	flag.Parse()
	if *addr != "" || *socket != "" {
		if err := serveHTTP(*addr, *socket); err != nil {
			fmt.Fprintln(os.Stderr, "benchecho:", err)
			os.Exit(1)
		}
		return
	}
	if err := serve(os.Stdin, os.Stdout); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "benchecho:", err)
		os.Exit(1)
	}
}

func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	var long []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			return err
		}
		answer(w, line)
		// Flush when no other request is waiting: answers to requests that
		// came together leave together.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// answer writes the response to one message; notifications get none.
func answer(w *bufio.Writer, line []byte) {
	id := splice.Value(line, "id")
	if id == nil {
		return
	}
	method := splice.Value(line, "method")
	params := splice.Value(line, "params")
	open := func() {
		w.WriteString(`{"jsonrpc":"2.0","id":`)
		w.Write(id)
		w.WriteString(`,"result":`)
	}
	switch string(method) {
	case `"initialize"`:
		version := splice.Value(params, "protocolVersion")
		if version == nil {
			version = []byte(`"2025-06-18"`)
		}
		open()
		w.WriteString(`{"protocolVersion":`)
		w.Write(version)
		w.WriteString(`,"capabilities":{"tools":{}},"serverInfo":{"name":"benchecho","version":"1"}}}` + "\n")
	case `"tools/list"`:
		open()
		w.WriteString(tools + "}\n")
	case `"ping"`:
		open()
		w.WriteString("{}}\n")
	case `"tools/call"`:
		args := splice.Value(params, "arguments")
		switch name := string(splice.Value(params, "name")); name {
		case `"echo"`:
			text := splice.Value(args, "text")
			if text == nil || text[0] != '"' {
				fail(w, id, -32602, "echo needs a string argument text")
				return
			}
			open()
			w.WriteString(`{"content":[{"type":"text","text":`)
			w.Write(text)
			w.WriteString("}]}}\n")
		case `"blob"`:
			n, err := strconv.Atoi(string(splice.Value(args, "bytes")))
			if err != nil || n < 0 {
				fail(w, id, -32602, "blob needs an integer argument bytes")
				return
			}
			open()
			w.WriteString(`{"content":[{"type":"text","text":"`)
			chunk := bytes.Repeat([]byte{'x'}, 64<<10)
			for n > 0 {
				k := min(n, len(chunk))
				w.Write(chunk[:k])
				n -= k
			}
			w.WriteString(`"}]}}` + "\n")
		default:
			fail(w, id, -32602, "unknown tool "+name)
		}
	default:
		fail(w, id, -32601, "method not found")
	}
}

func fail(w *bufio.Writer, id []byte, code int, msg string) {
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`+"\n", id, code, msg)
}

// serveHTTP answers POST /mcp on the TCP address addr or the unix socket:
// a request with its response as one JSON body whose Content-Length is
// set, anything else with 202. There is no session and no GET stream.
func serveHTTP(addr, socket string) error {
	network, where := "tcp", addr
	if socket != "" {
		network, where = "unix", socket
		os.Remove(socket)
	}
	ln, err := net.Listen(network, where)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "benchecho: listening on", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		line, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var out bytes.Buffer
		bw := bufio.NewWriterSize(&out, 64<<10)
		answer(bw, line)
		bw.Flush()
		if out.Len() == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
		w.Write(out.Bytes())
	})
	return http.Serve(ln, mux)
}
