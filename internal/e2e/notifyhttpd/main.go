// Command notifyhttpd is a socket-activated, Type=notify HTTP server that the e2e smoke test runs under the container's systemd.
//
// It serves on every socket systemd passes (LISTEN_FDS), sends READY=1 once
// it serves, and answers every request with a JSON object naming its PID,
// UID and host name, so a test can tell which process answered. SIGTERM
// stops it cleanly. It is built with CGO_ENABLED=0 so that it runs in any
// root file system.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
)

// Reply is the body of every answer.
type Reply struct {
	PID      int    `json:"pid"`
	UID      int    `json:"uid"`
	Hostname string `json:"hostname"`
}

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	listeners, err := activation.Listeners()
	if err != nil {
		fmt.Fprintf(os.Stderr, "notifyhttpd: taking sockets from systemd: %v\n", err)
		return 1
	}
	if len(listeners) == 0 {
		fmt.Fprintln(os.Stderr, "notifyhttpd: no sockets passed (LISTEN_FDS unset); start it through a .socket unit")
		return 1
	}
	hostname, err := os.Hostname()
	if err != nil {
		fmt.Fprintf(os.Stderr, "notifyhttpd: %v\n", err)
		return 1
	}
	reply := Reply{PID: os.Getpid(), UID: os.Getuid(), Hostname: hostname}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(reply)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { served <- srv.Serve(l) }()
	}
	// The sockets were listening before we started, so connections made
	// meanwhile are queued, not lost.
	if _, err := daemon.SdNotify(true, "READY=1\nSTATUS=serving "+fmt.Sprint(len(listeners))+" socket(s)"); err != nil {
		fmt.Fprintf(os.Stderr, "notifyhttpd: sd_notify READY=1: %v\n", err)
		return 1
	}

	select {
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			fmt.Fprintf(os.Stderr, "notifyhttpd: shutdown: %v\n", err)
			return 1
		}
		return 0
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "notifyhttpd: serve: %v\n", err)
		return 1
	}
}
