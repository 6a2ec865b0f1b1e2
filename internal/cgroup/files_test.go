package cgroup

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

func TestFiles(t *testing.T) {
	h := host{memory: 8 << 30, tasksMax: 4194303}
	got := files(config.Resources{
		MemoryMax:  config.Limit{Permyriad: 2500},
		MemoryHigh: config.Infinity,
		TasksMax:   config.Limit{Permyriad: 1000},
		CPUWeight:  200,
		CPUQuota:   15000,
		IOWeight:   300,
	}, h)
	want := []file{
		{"memory", "memory.high", "max"},
		{"memory", "memory.max", "2147483648"},
		{"pids", "pids.max", "419430"},
		{"cpu", "cpu.weight", "200"},
		{"cpu", "cpu.max", "150000 100000"},
		{"io", "io.weight", "default 300"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files() = %v\nwant %v", got, want)
	}
	// The kernel's least quota is 1ms per period.
	if got := files(config.Resources{CPUQuota: 1}, h); got[0].value != "1000 100000" {
		t.Errorf("cpu_quota 0.01%% renders %q, want the minimum 1000 100000", got[0].value)
	}
	if got := files(config.Resources{}, h); got != nil {
		t.Errorf("no limits render %v", got)
	}
}

func TestParseProc(t *testing.T) {
	dir := t.TempDir()
	mountinfo := filepath.Join(dir, "mountinfo")
	os.WriteFile(mountinfo, []byte(
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"+
			"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"+
			"41 31 0:38 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:9 - cgroup2 cgroup2 rw\n"), 0o644)
	if got, err := cgroup2Mount(mountinfo); err != nil || got != "/sys/fs/cgroup/uni fied" {
		t.Errorf("cgroup2Mount() = %q, %v", got, err)
	}
	os.WriteFile(mountinfo, []byte("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"), 0o644)
	if _, err := cgroup2Mount(mountinfo); err == nil {
		t.Error("cgroup2Mount() found a mount in a table without cgroup2")
	}
	procCgroup := filepath.Join(dir, "cgroup")
	os.WriteFile(procCgroup, []byte("4:memory:/x\n0::/system.slice/mcpgate.service\n"), 0o644)
	if got, err := ownCgroup(procCgroup); err != nil || got != "/system.slice/mcpgate.service" {
		t.Errorf("ownCgroup() = %q, %v", got, err)
	}
}
