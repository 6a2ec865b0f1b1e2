// Package reqstate seals the requestState of MCP's multi round-trip
// requests: an opaque token that only the daemon run that issued it can
// open, bound to a client, a request and an expiry.
//
// A token is base64url (no padding) of a clear header and an AES-256-GCM
// sealed body. The header says which host and which run of the daemon
// issued the token, so that a refusal can say where the token belongs; it
// is authenticated with the body. The body holds the expiry, the
// continuation the token resumes, its round, and SHA-256 digests of the
// client identity and of the request. The key is random, made by New and
// never stored: a restart makes every token issued before it useless.
//
// A token is not single-use by itself: the gateway keeps, per
// continuation, the round it expects next and consumes it on the first
// retry (see package gateway).
package reqstate

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// version is the first byte of every token of this layout.
const version = 1

// MaxTokenLen bounds the tokens Open decodes: longer ones are malformed.
// A token of this layout is about 150 characters plus the host name.
const MaxTokenLen = 1024

// maxHost bounds the host name in the header: it has one length byte.
const maxHost = 255

const (
	keyIDLen = 4
	idLen    = 16
	digest   = sha256.Size
	// bodyLen is the sealed body: expiry (unix ms), id, round, client and
	// request digests.
	bodyLen = 8 + idLen + 8 + digest + digest
)

// encoding is the tokens' base64url. Its decoder skips CR and LF even when
// strict, so Open refuses tokens holding them first: one state, one token.
var encoding = base64.RawURLEncoding.Strict()

// ID names a continuation: random, so that it cannot be guessed.
type ID [idLen]byte

// NewID returns a random ID.
func NewID() ID {
	var id ID
	rand.Read(id[:])
	return id
}

// String returns the id in hex, for logs.
func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// State is what a token carries.
type State struct {
	ID      ID        // the continuation the token resumes
	Round   uint64    // which of its InputRequiredResults the token answers
	Expires time.Time // after this the token is refused
}

// Sealer seals and opens tokens with a key of its own. It is safe for
// concurrent use.
type Sealer struct {
	aead   cipher.AEAD
	keyID  [keyIDLen]byte
	host   string
	header []byte // version, key id, host: authenticated, in clear
	nonces io.Reader
}

// New returns a Sealer with a fresh random key, whose tokens name host
// (at most 255 bytes; longer names are cut).
func New(host string) *Sealer {
	var key [32]byte
	var keyID [keyIDLen]byte
	rand.Read(key[:])
	rand.Read(keyID[:])
	return newSealer(host, key, keyID, rand.Reader)
}

// newSealer returns a Sealer with the given key and key id, taking nonces
// from nonces.
func newSealer(host string, key [32]byte, keyID [keyIDLen]byte, nonces io.Reader) *Sealer {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	if len(host) > maxHost {
		host = host[:maxHost]
	}
	s := &Sealer{aead: aead, host: host, keyID: keyID, nonces: nonces}
	s.header = append([]byte{version}, keyID[:]...)
	s.header = append(s.header, byte(len(host)))
	s.header = append(s.header, host...)
	return s
}

// Host returns the host name the Sealer's tokens carry.
func (s *Sealer) Host() string { return s.host }

// Seal returns the token for st, bound to client and request: Open
// refuses it for any other client or request.
func (s *Sealer) Seal(st State, client, request string) string {
	body := make([]byte, 0, bodyLen)
	body = binary.BigEndian.AppendUint64(body, uint64(st.Expires.UnixMilli()))
	body = append(body, st.ID[:]...)
	body = binary.BigEndian.AppendUint64(body, st.Round)
	c, r := sha256.Sum256([]byte(client)), sha256.Sum256([]byte(request))
	body = append(body, c[:]...)
	body = append(body, r[:]...)

	ns := s.aead.NonceSize()
	out := make([]byte, len(s.header), len(s.header)+ns+bodyLen+s.aead.Overhead())
	copy(out, s.header)
	out = out[:len(s.header)+ns]
	if _, err := io.ReadFull(s.nonces, out[len(s.header):]); err != nil {
		panic("reqstate: no random nonce: " + err.Error()) // crypto/rand does not fail
	}
	out = s.aead.Seal(out, out[len(s.header):], body, s.header)
	return encoding.EncodeToString(out)
}

// Open returns the state a token carries, after checking that this Sealer
// issued it unaltered, to client, for request, and that it has not expired
// at now. Every refusal is an *Error.
func (s *Sealer) Open(token, client, request string, now time.Time) (State, error) {
	if len(token) > MaxTokenLen || strings.ContainsAny(token, "\r\n") {
		return State{}, &Error{Reason: Malformed}
	}
	raw, err := encoding.DecodeString(token)
	if err != nil || len(raw) < 1+keyIDLen+1 || raw[0] != version {
		return State{}, &Error{Reason: Malformed}
	}
	hostLen := int(raw[1+keyIDLen])
	headerLen := 1 + keyIDLen + 1 + hostLen
	ns := s.aead.NonceSize()
	if len(raw) != headerLen+ns+bodyLen+s.aead.Overhead() {
		return State{}, &Error{Reason: Malformed}
	}
	header := raw[:headerLen]
	if host := string(header[1+keyIDLen+1:]); host != s.host {
		return State{}, &Error{Reason: OtherHost, Host: host}
	}
	if !bytes.Equal(header[1:1+keyIDLen], s.keyID[:]) {
		return State{}, &Error{Reason: Restarted, Host: s.host}
	}
	nonce := raw[headerLen : headerLen+ns]
	body, err := s.aead.Open(nil, nonce, raw[headerLen+ns:], header)
	if err != nil {
		return State{}, &Error{Reason: Tampered}
	}
	var st State
	st.Expires = time.UnixMilli(int64(binary.BigEndian.Uint64(body)))
	body = body[8:]
	copy(st.ID[:], body)
	body = body[idLen:]
	st.Round = binary.BigEndian.Uint64(body)
	body = body[8:]
	c, r := sha256.Sum256([]byte(client)), sha256.Sum256([]byte(request))
	switch {
	case !bytes.Equal(body[:digest], c[:]):
		return State{}, &Error{Reason: OtherClient}
	case !bytes.Equal(body[digest:], r[:]):
		return State{}, &Error{Reason: OtherRequest}
	case !now.Before(st.Expires):
		return State{}, &Error{Reason: Expired, Expired: st.Expires}
	}
	return st, nil
}

// Reason is why a token was refused.
type Reason int

// The reasons Open and the gateway refuse a token for.
const (
	Malformed    Reason = iota // not a token of this layout
	OtherHost                  // issued by another host (Error.Host)
	Restarted                  // issued on this host by another run of mcpgated (restarted, or another instance)
	Tampered                   // altered, or forged
	OtherClient                // issued to another client, or another identity of it
	OtherRequest               // issued for another method, tool, prompt or resource
	Expired                    // its expiry passed (Error.Expired)
	Replayed                   // the gateway: already used, or its continuation ended
)

var reasonNames = [...]string{"malformed", "other-host", "restarted", "tampered", "other-client", "other-request", "expired", "replayed"}

// String returns a short name of the reason, for logs and tests.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// Error is a refused token. Its message says why and what to do, and
// never quotes the token.
type Error struct {
	Reason  Reason
	Host    string    // for OtherHost: the host that issued it; for Restarted: this host
	Expired time.Time // for Expired
}

func (e *Error) Error() string {
	const again = "; send the original request again without requestState and inputResponses"
	switch e.Reason {
	case OtherHost:
		return fmt.Sprintf("requestState was issued by mcpgate on host %q, not this one: the call it continues lives in that host's memory (retries must reach the same host)%s", e.Host, again)
	case Restarted:
		return fmt.Sprintf("requestState was issued by another run of mcpgated on host %q (it restarted, or another instance there issued it): the call it continues is not here%s", e.Host, again)
	case Tampered:
		return "requestState was altered or not issued by mcpgate" + again
	case OtherClient:
		return "requestState was issued to another client, or to another identity of this one" + again
	case OtherRequest:
		return "requestState was issued for another request: a retry must repeat the original method and tool, prompt or resource" + again
	case Expired:
		return fmt.Sprintf("requestState expired at %s (the backend's client_request_timeout)%s", e.Expired.UTC().Format(time.RFC3339), again)
	case Replayed:
		return "requestState was already used, or the call it continued has ended" + again
	}
	return "requestState is malformed" + again
}

// Is makes errors.Is(err, &Error{Reason: r}) match any *Error of reason r.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Reason == e.Reason
}
