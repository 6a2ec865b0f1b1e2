package front

import "io"

// readBody is io.ReadAll of a request body that reads a body of a known
// length into one buffer of that size: io.ReadAll starts at 512 bytes and
// grows, three allocations and their copies for a 1 KiB call. A length
// that is unknown (-1) or over limit starts as io.ReadAll does; the
// reader still enforces the limit.
func readBody(r io.Reader, contentLength, limit int64) ([]byte, error) {
	size := 512
	if contentLength >= 0 && contentLength <= limit {
		size = int(contentLength) + 1 // the read that sees the end needs room
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append grow it
		}
	}
}
