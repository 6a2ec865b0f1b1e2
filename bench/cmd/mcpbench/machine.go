package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/bench/internal/report"
)

// machine states what the benchmark runs on.
func machine(node string) report.Machine {
	m := report.Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			m.MemMiB = kib / 1024
		}
	}
	if out, err := exec.Command(node, "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	return m
}

// versions returns the version of each gateway.
func versions(o *options) map[string]string {
	v := map[string]string{"mcpgate": o.version, "floor": "bench/cmd/benchfloor"}
	for _, name := range []string{"supergateway", "mcp-proxy"} {
		var pkg struct{ Version string }
		b, err := os.ReadFile(filepath.Join(o.npm, "node_modules", name, "package.json"))
		if err == nil && json.Unmarshal(b, &pkg) == nil {
			v[name] = pkg.Version
		}
	}
	return v
}
