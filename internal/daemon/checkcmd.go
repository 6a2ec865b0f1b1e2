package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
)

// commandProblem is a backend command that would not start: an error for
// a path that names no executable, a warning for a bare name this
// environment's PATH lacks (the service's PATH may differ).
type commandProblem struct {
	err     *config.Error
	warning bool
}

// checkCommands resolves each enabled backend's command as spawning would:
// a path relative to the backend's cwd, or a bare name looked up in the
// PATH of this process.
func checkCommands(cfg *config.Config) []commandProblem {
	var out []commandProblem
	for _, b := range cfg.EnabledBackends() {
		problem := func(warning bool, format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			if warning {
				msg = "warning: " + msg
			}
			out = append(out, commandProblem{warning: warning, err: &config.Error{
				File: b.File, Line: b.CommandLine, Key: "backends." + b.Name + ".command", Msg: msg,
			}})
		}
		if !strings.Contains(b.Command, "/") {
			if _, err := exec.LookPath(b.Command); err != nil {
				problem(true, "%q is not found on PATH (%s); the service's PATH may differ, else install it or give an absolute path", b.Command, os.Getenv("PATH"))
			}
			continue
		}
		path := b.Command
		if !filepath.IsAbs(path) && b.Cwd != "" {
			path = filepath.Join(b.Cwd, path)
		}
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problem(!filepath.IsAbs(path), "%s does not exist; install the server or fix the path", path)
		case err != nil:
			problem(!filepath.IsAbs(path), "%s: %v", path, err)
		case info.IsDir() || info.Mode()&0o111 == 0:
			problem(!filepath.IsAbs(path), "%s is not an executable file; fix the path or chmod +x it", path)
		}
	}
	return out
}
