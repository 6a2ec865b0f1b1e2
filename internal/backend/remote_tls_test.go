package backend

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testPKI is a CA made for one test, with a server certificate for
// 127.0.0.1 and a client certificate, written as PEM files.
type testPKI struct {
	caFile, clientCert, clientKey string
	pool                          *x509.CertPool
	server                        tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	srvCert, srvKey := issue(2, &x509.Certificate{
		Subject: pkix.Name{CommonName: "server"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"mcp.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	cliCert, cliKey := issue(3, &x509.Certificate{
		Subject: pkix.Name{CommonName: "mcpgate"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p := &testPKI{
		caFile: filepath.Join(dir, "ca.pem"), clientCert: filepath.Join(dir, "client.pem"), clientKey: filepath.Join(dir, "client.key"),
		pool: x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	for path, data := range map[string][]byte{
		p.caFile:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		p.clientCert: cliCert, p.clientKey: cliKey,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if p.server, err = tls.X509KeyPair(srvCert, srvKey); err != nil {
		t.Fatal(err)
	}
	return p
}

// TLS is verified against tls_ca_file (never skipped), a server that
// requires a client certificate gets the configured one, and HTTP/2 is
// used when the server offers it.
func TestRemoteBackendTLS(t *testing.T) {
	pki := newTestPKI(t)
	var proto atomic.Value
	proto.Store("")
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sdkServer() }, nil)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		sdk.ServeHTTP(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	url := ts.URL + "/mcp"

	for _, tc := range []struct {
		name       string
		ca, cert   bool
		serverName string
		wantErr    string // "" when it must become healthy
	}{
		{"mTLS with the test CA", true, true, "", ""},
		{"server name set", true, true, "mcp.test", ""},
		{"wrong server name", true, true, "other.test", "certificate is valid for"},
		{"system roots do not know the CA", false, true, "", "certificate signed by unknown authority"},
		{"no client certificate", true, false, "", "cannot reach backend"}, // TLS 1.3 refuses it after the handshake
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := remoteConfig(url)
			if tc.ca {
				cfg.TLSCAFile = pki.caFile
			}
			if tc.cert {
				cfg.TLSClientCertFile, cfg.TLSClientKeyFile = pki.clientCert, pki.clientKey
			}
			cfg.TLSServerName = tc.serverName
			r := runRemote(t, cfg, "")
			if tc.wantErr == "" {
				r.await(t, "healthy", healthy)
				if res, err := r.call(t, "echo", `{"text":"over tls"}`); err != nil || !strings.Contains(string(res), "over tls") {
					t.Errorf("echo = %s, %v", res, err)
				}
				if got := proto.Load().(string); got != "HTTP/2.0" {
					t.Errorf("protocol %q, want HTTP/2.0", got)
				}
				return
			}
			st := r.await(t, "failing", func(st Status) bool { return st.LastError != "" })
			if st.State == Healthy || !strings.Contains(st.LastError, tc.wantErr) {
				t.Errorf("state %s, LastError %q; want an error with %q", st.State, st.LastError, tc.wantErr)
			}
		})
	}
}
