package front

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name          string
		body          string
		contentLength int64
		limit         int64
		tooLarge      bool
	}{
		{"known length", strings.Repeat("x", 1500), 1500, 4096, false},
		{"unknown length", strings.Repeat("y", 3000), -1, 4096, false},
		{"empty", "", 0, 4096, false},
		{"over the limit", strings.Repeat("z", 5000), 5000, 4096, true},
		{"unknown length over the limit", strings.Repeat("z", 5000), -1, 4096, true},
		{"length understated", strings.Repeat("w", 700), 10, 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := http.MaxBytesReader(w, io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.body))), tc.limit)
			got, err := readBody(r, tc.contentLength, tc.limit)
			var mbe *http.MaxBytesError
			if tc.tooLarge {
				if !errors.As(err, &mbe) {
					t.Fatalf("err = %v, want a MaxBytesError", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, []byte(tc.body)) {
				t.Fatalf("readBody = %d bytes, %v; want the %d bytes", len(got), err, len(tc.body))
			}
		})
	}
}

// TestReadBodyAllocations is the budget of reading a body of known length:
// one buffer (io.ReadAll takes three for 1 KiB).
func TestReadBodyAllocations(t *testing.T) {
	body := strings.Repeat("x", 1100)
	var sr strings.Reader
	if n := testing.AllocsPerRun(100, func() {
		sr.Reset(body)
		readBody(&sr, int64(len(body)), 1<<20)
	}); n != 1 {
		t.Errorf("readBody allocates %v times for 1100 bytes, want 1", n)
	}
}
