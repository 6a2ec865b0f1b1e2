package backend

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
)

// MinimalEnv returns what a child inherits of the daemon's environment
// base: the variables every program needs (PATH, HOME, LANG, LC_*, TZ),
// the npm and XDG cache variables a server started with npx uses, and the
// variables named in inherit. Everything else of the daemon's environment,
// which may hold its own secrets, stays with the daemon.
func MinimalEnv(base []string, inherit []string) []string {
	var env []string
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if inheritedByDefault(name) || slices.Contains(inherit, name) {
			env = append(env, kv)
		}
	}
	return env
}

func inheritedByDefault(name string) bool {
	switch name {
	case "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR",
		"GORACE", "GOCOVERDIR", "GOTRACEBACK": // the Go runtime's diagnostics, for servers written in Go
		return true
	}
	return strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "XDG_") ||
		strings.HasPrefix(name, "npm_config_") || strings.HasPrefix(name, "NPM_CONFIG_")
}

// expandCredentials replaces each ${credential:NAME} in s by the content of
// the credential NAME in dir. Its errors name the credential, never a
// value.
func expandCredentials(s, dir string) (string, error) {
	if !strings.Contains(s, "${credential:") {
		return s, nil
	}
	var firstErr error
	out := credentialPlaceholder.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[len("${credential:") : len(ref)-1]
		v, err := config.ReadCredential(dir, name)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	return out, firstErr
}

var credentialPlaceholder = config.CredentialPlaceholder()

// childCommand returns the argv and environment a backend's child starts
// with: its configuration with every credential placeholder filled in.
// The configuration itself keeps the placeholders, and so does everything
// that shows it (logs, D-Bus, status).
func childCommand(cfg *config.Backend, opts Options) (argv, env []string, err error) {
	argv = make([]string, 0, 1+len(cfg.Args))
	argv = append(argv, cfg.Command)
	for _, a := range cfg.Args {
		v, err := expandCredentials(a, opts.CredentialsDirectory)
		if err != nil {
			return nil, nil, err
		}
		argv = append(argv, v)
	}
	env, err = childEnv(cfg, opts)
	return argv, env, err
}

// childEnv returns the environment a backend's child or prerequisite
// starts with: the minimal set of the daemon's, the variables named in
// inherit_env, and the backend's env with its credentials filled in.
func childEnv(cfg *config.Backend, opts Options) ([]string, error) {
	extra, err := configuredEnv(cfg, opts)
	if err != nil {
		return nil, err
	}
	return ChildEnv(MinimalEnv(opts.Env, cfg.InheritEnv), extra), nil
}

// unitEnv returns what a server under runner = "unit" gets on top of its
// unit's own environment (which sets HOME, PATH and the caches): the
// variables of the daemon's named in inherit_env, and the backend's env
// with its credentials filled in.
func unitEnv(cfg *config.Backend, opts Options) ([]string, error) {
	extra, err := configuredEnv(cfg, opts)
	if err != nil {
		return nil, err
	}
	var inherited []string
	for _, kv := range opts.Env {
		if name, _, _ := strings.Cut(kv, "="); slices.Contains(cfg.InheritEnv, name) {
			inherited = append(inherited, kv)
		}
	}
	return ChildEnv(inherited, extra), nil
}

// configuredEnv returns the backend's env with its credentials filled in.
func configuredEnv(cfg *config.Backend, opts Options) (map[string]string, error) {
	return expandEnv(cfg.Env, opts.CredentialsDirectory)
}

// expandEnv returns env with the credentials of dir filled in.
func expandEnv(env map[string]string, dir string) (map[string]string, error) {
	extra := make(map[string]string, len(env))
	for k, v := range env {
		var err error
		if extra[k], err = expandCredentials(v, dir); err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
	}
	return extra, nil
}
