package gateways

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Authenticated returns mcpgate with auth = "required" and one client,
// besides what extra adds to its configuration (an [oauth] table), whose
// sessions send token: the cost of knowing who calls.
func Authenticated(name, extra, token string) *Gateway {
	return &Gateway{
		Name:  name,
		Token: token,
		argv: func(e *Env, port int, backend []string) ([]string, error) {
			cfg := MCPGateConfig(fmt.Sprintf("127.0.0.1:%d", port), 1, backend)
			cfg = strings.Replace(cfg, `auth = "none"`, `auth = "required"`, 1) + "\n" + extra
			path := filepath.Join(e.Work, name+"-"+strconv.Itoa(port)+".toml")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				return nil, err
			}
			return []string{filepath.Join(e.Bin, "mcpgated"), "--config", path}, nil
		},
	}
}

// SharedHost returns mcpgate as a host shared by several clients runs it:
// a client known by its bearer token, with a tool policy of 20 rules, an
// audit entry written for every call (log_level = "info", to stderr), and
// the backend's max_concurrent_calls and rate_limit set high enough never
// to refuse the bench's calls. tokenSHA256 is the token's digest in hex.
func SharedHost(name, token, tokenSHA256 string) *Gateway {
	var rules []string
	for i := range 18 {
		rules = append(rules, fmt.Sprintf("%q", fmt.Sprintf("team%d__*", i)))
	}
	rules = append(rules, `"echo"`, `"!*delete*"`)
	return &Gateway{
		Name:  name,
		Token: token,
		argv: func(e *Env, port int, backend []string) ([]string, error) {
			cfg := MCPGateConfig(fmt.Sprintf("127.0.0.1:%d", port), 1, backend)
			cfg = strings.Replace(cfg, `auth = "none"`, `auth = "required"`, 1)
			cfg = strings.Replace(cfg, `log_level = "warn"`, "log_level = \"info\"\naudit = \"calls\"", 1)
			cfg += "max_concurrent_calls = 1024\nrate_limit = \"10000000/1s\"\n"
			cfg += fmt.Sprintf("\n[clients.bench]\ntoken_sha256 = %q\ntools = [%s]\n", tokenSHA256, strings.Join(rules, ", "))
			path := filepath.Join(e.Work, name+"-"+strconv.Itoa(port)+".toml")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				return nil, err
			}
			return []string{filepath.Join(e.Bin, "mcpgated"), "--config", path}, nil
		},
	}
}

// Traced returns mcpgate with OpenTelemetry on ([telemetry] traces and
// metrics), every call sampled (OTEL_TRACES_SAMPLER=always_on), its spans
// and metrics exported over OTLP/HTTP to endpoint: the cost of tracing
// every call.
func Traced(name, endpoint string) *Gateway {
	return &Gateway{
		Name: name,
		env:  []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_TRACES_SAMPLER=always_on"},
		argv: func(e *Env, port int, backend []string) ([]string, error) {
			cfg := MCPGateConfig(fmt.Sprintf("127.0.0.1:%d", port), 1, backend) + "\n[telemetry]\ntraces = true\nmetrics = true\n"
			path := filepath.Join(e.Work, name+"-"+strconv.Itoa(port)+".toml")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				return nil, err
			}
			return []string{filepath.Join(e.Bin, "mcpgated"), "--config", path}, nil
		},
	}
}
