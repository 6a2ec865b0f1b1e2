// Command benchfloor is the physical floor of the benchmark: the least any
// gateway from Streamable HTTP to a stdio server must do. It writes each
// POSTed message to the child as one line with a new id, matches the answer
// by that id and restores the client's id; it parses nothing else, keeps no
// sessions and streams nothing.
//
//	benchfloor -listen 127.0.0.1:PORT -- COMMAND [ARG...]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mcpgate/mcpgate/bench/internal/splice"
)

const maxMessage = 256 << 20 // large enough for the 50 MB result

func main() {
	listen := flag.String("listen", "127.0.0.1:7440", "address to serve /mcp on")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchfloor -listen ADDR -- COMMAND [ARG...]")
		os.Exit(2)
	}
	if err := run(*listen, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchfloor:", err)
		os.Exit(1)
	}
}

// floor is one child and the requests waiting for it.
type floor struct {
	stdin   io.Writer
	writeMu sync.Mutex
	next    atomic.Int64
	mu      sync.Mutex
	waiting map[int64]chan []byte
}

func run(listen string, argv []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	f := &floor{stdin: stdin, waiting: map[int64]chan []byte{}}
	childDone := make(chan error, 1)
	go func() { childDone <- f.read(stdout) }()
	srv := &http.Server{Addr: listen, Handler: f}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case <-ctx.Done():
		srv.Close()
		return nil
	case err := <-childDone:
		srv.Close()
		return fmt.Errorf("child: %w", err)
	case err := <-served:
		return err
	}
}

// read hands each line of the child's output to the request with its id.
func (f *floor) read(stdout io.Reader) error {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(string(splice.Value(line, "id")), 10, 64)
		if err != nil {
			continue // a notification or a request from the child: dropped
		}
		f.mu.Lock()
		ch := f.waiting[n]
		delete(f.waiting, n)
		f.mu.Unlock()
		if ch != nil {
			ch <- line
		}
	}
}

func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMessage))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	body = bytes.TrimRight(body, " \r\n\t")
	id := splice.Value(body, "id")
	if id == nil {
		f.write(append(body, '\n'))
		w.WriteHeader(http.StatusAccepted)
		return
	}
	n := f.next.Add(1)
	line, _ := splice.Replace(make([]byte, 0, len(body)+16), body, "id", strconv.AppendInt(nil, n, 10))
	ch := make(chan []byte, 1)
	f.mu.Lock()
	f.waiting[n] = ch
	f.mu.Unlock()
	if err := f.write(append(line, '\n')); err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	select {
	case resp := <-ch:
		out, _ := splice.Replace(make([]byte, 0, len(resp)+len(id)), resp, "id", id)
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	case <-r.Context().Done():
		f.mu.Lock()
		delete(f.waiting, n)
		f.mu.Unlock()
	}
}

func (f *floor) write(line []byte) error {
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	_, err := f.stdin.Write(line)
	return err
}
