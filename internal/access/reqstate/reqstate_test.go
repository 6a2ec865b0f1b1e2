package reqstate

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	client  = "alice"
	request = "tools/call\x00github__create_issue"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func fixedSealer(host string, keyByte byte) *Sealer {
	var key [32]byte
	for i := range key {
		key[i] = keyByte
	}
	return newSealer(host, key, [keyIDLen]byte{keyByte, 1, 2, 3}, &counter{})
}

// counter is a nonce source that gives the same nonces in every process,
// so that fuzz seeds sealed in one are the same in the others.
type counter struct{ n byte }

func (c *counter) Read(p []byte) (int, error) {
	for i := range p {
		c.n++
		p[i] = c.n
	}
	return len(p), nil
}

func TestOpenReturnsWhatWasSealed(t *testing.T) {
	s := New("host-a")
	st := State{ID: NewID(), Round: 7, Expires: now.Add(time.Minute)}
	tok := s.Seal(st, client, request)
	got, err := s.Open(tok, client, request, now)
	if err != nil {
		t.Fatalf("Open of a fresh token: %v", err)
	}
	if got.ID != st.ID || got.Round != st.Round || !got.Expires.Equal(st.Expires) {
		t.Errorf("Open = %+v, want %+v", got, st)
	}
	if strings.Contains(tok, client) || strings.Contains(tok, "create_issue") {
		t.Errorf("token %q shows the client or the request in clear", tok)
	}
	if tok2 := s.Seal(st, client, request); tok2 == tok {
		t.Errorf("two seals of the same state gave the same token: the nonce is not fresh")
	}
}

func TestOpenRefuses(t *testing.T) {
	s := fixedSealer("host-a", 1)
	st := State{ID: NewID(), Round: 1, Expires: now.Add(time.Minute)}
	tok := s.Seal(st, client, request)
	raw, _ := encoding.DecodeString(tok)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		return encoding.EncodeToString(b)
	}
	tests := []struct {
		name            string
		sealer          *Sealer
		token           string
		client, request string
		at              time.Time
		want            Reason
		wantInMessage   string
	}{
		{"empty", s, "", client, request, now, Malformed, "malformed"},
		{"not base64", s, "!!!" + tok, client, request, now, Malformed, "malformed"},
		{"padded base64", s, base64.URLEncoding.EncodeToString(raw), client, request, now, Malformed, "malformed"},
		{"line break inside", s, tok[:10] + "\n" + tok[10:], client, request, now, Malformed, "malformed"},
		{"carriage return at the end", s, tok + "\r", client, request, now, Malformed, "malformed"},
		{"truncated", s, tok[:len(tok)-4], client, request, now, Malformed, "malformed"},
		{"too long", s, tok + strings.Repeat("A", MaxTokenLen), client, request, now, Malformed, "malformed"},
		{"other version", s, func() string { b := append([]byte(nil), raw...); b[0] = 2; return encoding.EncodeToString(b) }(), client, request, now, Malformed, "malformed"},
		{"body bit flipped", s, flip(len(raw) - 20), client, request, now, Tampered, "altered"},
		{"tag bit flipped", s, flip(len(raw) - 1), client, request, now, Tampered, "altered"},
		{"nonce bit flipped", s, flip(1 + keyIDLen + 1 + len("host-a")), client, request, now, Tampered, "altered"},
		{"other key, same id", fixedSealer("host-a", 1).withKey(9), tok, client, request, now, Tampered, "altered"},
		{"restarted", fixedSealer("host-a", 2), tok, client, request, now, Restarted, `another run of mcpgated on host "host-a"`},
		{"other host", fixedSealer("host-b", 1), tok, client, request, now, OtherHost, `host "host-a"`},
		{"other client", s, tok, "mallory", request, now, OtherClient, "another client"},
		{"other request", s, tok, client, "tools/call\x00github__delete_repo", now, OtherRequest, "another request"},
		{"expired", s, tok, client, request, now.Add(time.Minute), Expired, "expired at 2026-11-27T12:01:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.sealer.Open(tt.token, tt.client, tt.request, tt.at)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Open = %v, want an *Error", err)
			}
			if e.Reason != tt.want {
				t.Errorf("reason = %v, want %v (%v)", e.Reason, tt.want, err)
			}
			if !errors.Is(err, &Error{Reason: tt.want}) {
				t.Errorf("errors.Is does not match reason %v", tt.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.wantInMessage) || strings.Contains(msg, tok) {
				t.Errorf("message %q: want it to contain %q and not the token", msg, tt.wantInMessage)
			}
		})
	}
}

// withKey returns a Sealer with s's host and key id but another key: a
// forger who copied the header.
func (s *Sealer) withKey(b byte) *Sealer {
	var key [32]byte
	for i := range key {
		key[i] = b
	}
	return newSealer(s.host, key, s.keyID, &counter{})
}

func TestLongHostIsCut(t *testing.T) {
	s := New(strings.Repeat("h", 300))
	if len(s.Host()) != maxHost {
		t.Fatalf("host of %d bytes kept, want %d", len(s.Host()), maxHost)
	}
	tok := s.Seal(State{ID: NewID(), Expires: now.Add(time.Second)}, client, request)
	if len(tok) > MaxTokenLen {
		t.Errorf("a token with the longest host is %d bytes, above MaxTokenLen %d", len(tok), MaxTokenLen)
	}
	if _, err := s.Open(tok, client, request, now); err != nil {
		t.Errorf("Open with the longest host: %v", err)
	}
}

// FuzzOpen checks that no string but a token the Sealer issued opens,
// that every refusal is an *Error and that none quotes the input.
func FuzzOpen(f *testing.F) {
	s := fixedSealer("host-a", 1)
	st := State{ID: ID{1, 2, 3}, Round: 3, Expires: now.Add(time.Hour)}
	issued := map[string]string{} // token → the client it was issued to
	for _, c := range []string{client, "", "bob"} {
		tok := s.Seal(st, c, request)
		issued[tok] = c
		f.Add(tok, c)
	}
	f.Add("", client)
	f.Add("AQ", client)
	f.Fuzz(func(t *testing.T, tok, c string) {
		got, err := s.Open(tok, c, request, now)
		if err == nil {
			if to, ok := issued[tok]; !ok || to != c {
				t.Fatalf("Open accepted %q for client %q, which was never issued to it", tok, c)
			}
			if got.ID != st.ID || got.Round != st.Round || !got.Expires.Equal(st.Expires) {
				t.Fatalf("Open = %+v, want %+v", got, st)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Open refused with %T %v, want an *Error", err, err)
		}
		if len(tok) >= 8 && strings.Contains(err.Error(), tok) {
			t.Fatalf("the refusal quotes the token: %v", err)
		}
	})
}
