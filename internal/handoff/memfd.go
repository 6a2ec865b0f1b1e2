package handoff

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// WriteMemfd returns a sealed memfd holding data, for the next process to
// read with ReadFD: nothing on disk, and nothing can change it once sealed.
// It is close-on-exec until the caller clears that for the re-exec.
func WriteMemfd(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("mcpgate-handoff", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("handoff: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mcpgate-handoff")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("handoff: write the record: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("handoff: seal the record: %w", err)
	}
	return f, nil
}

// ReadFD reads a record of at most MaxRecordBytes from fd, from its start
// if it is a file (a memfd) or as it comes (a pipe), and closes fd.
func ReadFD(fd int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), "mcpgate-handoff")
	if f == nil {
		return nil, fmt.Errorf("handoff: descriptor %d is not valid", fd)
	}
	defer f.Close()
	f.Seek(0, io.SeekStart) // a pipe cannot, and starts where it starts
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("handoff: read descriptor %d: %w", fd, err)
	}
	if len(data) > MaxRecordBytes {
		return nil, ErrTooLarge
	}
	return data, nil
}
