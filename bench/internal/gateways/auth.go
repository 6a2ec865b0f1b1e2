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
