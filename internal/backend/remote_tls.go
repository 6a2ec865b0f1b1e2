package backend

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// httpClient returns the HTTP client of a remote backend: its own pool of
// at most MaxConnections connections, HTTP/2 where the server offers it,
// TLS verified against the system roots or tls_ca_file, with a client
// certificate for mTLS. The files are read at every start, so a renewed
// certificate takes effect at the next restart. There is no way to skip
// verification.
func httpClient(cfg *config.Remote) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.TLSServerName}
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca_file: %s holds no PEM certificate", cfg.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if (cfg.TLSClientCertFile == "") != (cfg.TLSClientKeyFile == "") {
		return nil, errors.New("tls_client_cert_file and tls_client_key_file go together (mTLS); set both or neither")
	}
	if cfg.TLSClientCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSClientCertFile, cfg.TLSClientKeyFile)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("tls_client_cert_file/tls_client_key_file: %w", err)
			}
			// Never quote the key's content.
			return nil, fmt.Errorf("tls_client_cert_file %s and tls_client_key_file %s are not a matching PEM certificate and key", cfg.TLSClientCertFile, cfg.TLSClientKeyFile)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tc,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxConnsPerHost:     cfg.MaxConnections,
		MaxIdleConnsPerHost: cfg.MaxConnections,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{Transport: tr}, nil
}

// Peer returns the credentials of the server process behind a remote
// backend's unix socket, as the kernel took them at its last connection,
// and false for a backend that is not on a unix socket or has made no
// connection since it started.
func (b *Backend) Peer() (mcphttp.PeerCred, bool) {
	c := b.loadHot().conn
	if c == nil || c.remote == nil || c.remote.unix == nil {
		return mcphttp.PeerCred{}, false
	}
	return c.remote.unix.Peer()
}
