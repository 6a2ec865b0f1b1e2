package config

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestResourceKeys(t *testing.T) {
	tests := []struct {
		toml string
		want Resources
	}{
		{`memory_max = "512M"`, Resources{MemoryMax: Limit{Value: 512 << 20}}},
		{`memory_max = 1048576`, Resources{MemoryMax: Limit{Value: 1 << 20}}},
		{`memory_max = "2G"`, Resources{MemoryMax: Limit{Value: 2 << 30}}},
		{`memory_max = "1T"`, Resources{MemoryMax: Limit{Value: 1 << 40}}},
		{`memory_max = "100K"`, Resources{MemoryMax: Limit{Value: 100 << 10}}},
		{`memory_max = "4096"`, Resources{MemoryMax: Limit{Value: 4096}}},
		{`memory_max = "25%"`, Resources{MemoryMax: Limit{Permyriad: 2500}}},
		{`memory_max = "12.5%"`, Resources{MemoryMax: Limit{Permyriad: 1250}}},
		{`memory_max = "0.01%"`, Resources{MemoryMax: Limit{Permyriad: 1}}},
		{`memory_max = "100%"`, Resources{MemoryMax: Limit{Permyriad: 10000}}},
		{`memory_max = "infinity"`, Resources{MemoryMax: Infinity}},
		{`memory_high = "256M"`, Resources{MemoryHigh: Limit{Value: 256 << 20}}},
		{`tasks_max = 64`, Resources{TasksMax: Limit{Value: 64}}},
		{`tasks_max = "64"`, Resources{TasksMax: Limit{Value: 64}}},
		{`tasks_max = "10%"`, Resources{TasksMax: Limit{Permyriad: 1000}}},
		{`tasks_max = "infinity"`, Resources{TasksMax: Infinity}},
		{`cpu_weight = 1`, Resources{CPUWeight: 1}},
		{`cpu_weight = "10000"`, Resources{CPUWeight: 10000}},
		{`cpu_quota = "20%"`, Resources{CPUQuota: 2000}},
		{`cpu_quota = "250%"`, Resources{CPUQuota: 25000}},
		{`cpu_quota = "0.5%"`, Resources{CPUQuota: 50}},
		{`io_weight = 500`, Resources{IOWeight: 500}},
	}
	for _, tt := range tests {
		t.Run(tt.toml, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": backendHeader + tt.toml + "\n"})
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Backends["gh"].Resources; got != tt.want {
				t.Errorf("Resources = %+v, want %+v", got, tt.want)
			}
			if !c.Backends["gh"].Limited() {
				t.Error("Limited() = false with a limit set")
			}
		})
	}
}

func TestResourceErrors(t *testing.T) {
	const gh = "[backends.gh]\ncommand = \"gh\"\n"
	tests := []struct{ toml, want string }{
		{`memory_max = "512X"`, `mcpgate.toml:3:1: backends.gh.memory_max: "512X" is not a size: a whole number of bytes, optionally followed by K, M, G or T (base 1024); write "512M", "2G", "25%" or "infinity"`},
		{`memory_max = "512 M"`, `backends.gh.memory_max: "512 M" is not a size`},
		{`memory_max = "1.5G"`, `backends.gh.memory_max: "1.5G" is not a size`},
		{`memory_max = "-1"`, `backends.gh.memory_max: "-1" is not a size`},
		{`memory_max = ""`, `backends.gh.memory_max: "" is not a size`},
		{`memory_max = "0"`, `mcpgate.toml:3:1: backends.gh.memory_max: "0" is 0, which would allow nothing; use at least 1; write "512M", "2G", "25%" or "infinity"`},
		{`memory_max = 0`, `mcpgate.toml:3:1: backends.gh.memory_max: 0 is out of range; use at least 1 (bytes), or "512M", "2G", "25%" or "infinity"`},
		{`memory_max = "99999999T"`, `backends.gh.memory_max: "99999999T" is too large`},
		{`memory_max = "101%"`, `mcpgate.toml:3:1: backends.gh.memory_max: "101%" is not a percentage of physical memory from 0.01% to 100%; write "512M", "2G", "25%" or "infinity"`},
		{`memory_max = "0%"`, `"0%" is not a percentage of physical memory`},
		{`memory_max = "1.234%"`, `"1.234%" is not a percentage of physical memory`},
		{`memory_max = "%"`, `"%" is not a percentage of physical memory`},
		{`memory_max = 1.5`, `mcpgate.toml:3:1: backends.gh.memory_max: expected a number or a string, got float 1.5; write "512M", "2G", "25%" or "infinity"`},
		{`memory_high = "lots"`, `backends.gh.memory_high: "lots" is not a size`},
		{`tasks_max = "1K"`, `mcpgate.toml:3:1: backends.gh.tasks_max: "1K" is not a whole number of tasks; write 64, "10%" or "infinity"`},
		{`tasks_max = 0`, `backends.gh.tasks_max: 0 is out of range; use at least 1 (tasks), or 64, "10%" or "infinity"`},
		{`tasks_max = "200%"`, `"200%" is not a percentage of the system's task maximum from 0.01% to 100%`},
		{`cpu_weight = 0`, `mcpgate.toml:3:1: backends.gh.cpu_weight: 0 is out of range; use 1 to 10000 (the kernel's default is 100)`},
		{`cpu_weight = 10001`, `backends.gh.cpu_weight: 10001 is out of range; use 1 to 10000`},
		{`cpu_weight = "idle"`, `mcpgate.toml:3:1: backends.gh.cpu_weight: "idle" is not a weight; write a whole number from 1 to 10000 (the kernel's default is 100)`},
		{`io_weight = true`, `mcpgate.toml:3:1: backends.gh.io_weight: expected an integer, got boolean true; write a whole number from 1 to 10000 without quotes`},
		{`cpu_quota = 50`, `mcpgate.toml:3:1: backends.gh.cpu_quota: expected a percentage string such as "50%", got integer 50; write it quoted with a percent sign, e.g. "50%"`},
		{`cpu_quota = "0%"`, `mcpgate.toml:3:1: backends.gh.cpu_quota: "0%" is not a percentage of one CPU greater than 0; write "50%" for half a CPU or "200%" for two`},
		{`cpu_quota = "half"`, `backends.gh.cpu_quota: "half" is not a percentage of one CPU`},
		{`cpu_quota = "-5%"`, `backends.gh.cpu_quota: "-5%" is not a percentage of one CPU`},
		{`memroy_max = "1G"`, `backends.gh.memroy_max: unknown key (did you mean "memory_max"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.toml, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": gh + tt.toml + "\n"})
			lines := errorLines(t, path)
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("error %q, want one line with %q", lines, tt.want)
			}
		})
	}
}

func TestResourcesRefusedWithoutProcess(t *testing.T) {
	for _, tc := range []struct{ name, toml, want string }{
		{"remote", `url = "https://h/mcp"` + "\n" + `memory_max = "1G"`,
			`mcpgate.toml:3:1: backends.r.memory_max: memory_max limits a backend's server process; a remote backend (url) has none to limit; remove it`},
		{"cli", `transport = "cli"` + "\n" + `cpu_quota = "50%"` + "\n" + `tools.t = { command = ["true"] }`,
			`mcpgate.toml:3:1: backends.r.cpu_quota: cpu_quota limits a backend's server process; a cli backend (transport = "cli") has none to limit; remove it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[backends.r]\n" + tc.toml + "\n"})
			lines := errorLines(t, path)
			if len(lines) != 1 || lines[0] != tc.want {
				t.Errorf("error %q, want %q", lines, tc.want)
			}
		})
	}
}

func TestUnitProperties(t *testing.T) {
	r := Resources{
		MemoryMax:  Limit{Permyriad: 5000},
		MemoryHigh: Limit{Value: 256 << 20},
		TasksMax:   Infinity,
		CPUWeight:  50,
		CPUQuota:   15000,
		IOWeight:   200,
	}
	want := []UnitProperty{
		{"MemoryMaxScale", uint32(2147483648)},
		{"MemoryHigh", uint64(256 << 20)},
		{"TasksMax", uint64(math.MaxUint64)},
		{"CPUWeight", uint64(50)},
		{"CPUQuotaPerSecUSec", uint64(1500000)},
		{"IOWeight", uint64(200)},
	}
	if got := r.UnitProperties(); !reflect.DeepEqual(got, want) {
		t.Errorf("UnitProperties() = %v\nwant %v", got, want)
	}
	if got := (Resources{TasksMax: Limit{Permyriad: 10000}}).UnitProperties(); !reflect.DeepEqual(got, []UnitProperty{{"TasksMaxScale", uint32(math.MaxUint32)}}) {
		t.Errorf("TasksMax=100%% renders %v", got)
	}
	if got := (Resources{}).UnitProperties(); got != nil {
		t.Errorf("no limits render %v, want none", got)
	}
}

func TestLimitScaleAndString(t *testing.T) {
	tests := []struct {
		l     Limit
		total uint64
		want  uint64
		str   string
	}{
		{Limit{}, 1000, math.MaxUint64, ""},
		{Infinity, 1000, math.MaxUint64, "infinity"},
		{Limit{Value: 42}, 1000, 42, "42"},
		{Limit{Permyriad: 2500}, 8 << 30, 2 << 30, "25%"},
		{Limit{Permyriad: 1250}, 1000, 125, "12.5%"},
		{Limit{Permyriad: 1}, 1 << 20, 104, "0.01%"},
		{Limit{Permyriad: 10000}, math.MaxUint64 - 1, math.MaxUint64 / 10000 * 10000, "100%"},
	}
	for _, tt := range tests {
		if got := tt.l.Scale(tt.total); got != tt.want {
			t.Errorf("%+v.Scale(%d) = %d, want %d", tt.l, tt.total, got, tt.want)
		}
		if got := tt.l.String(); got != tt.str {
			t.Errorf("%+v.String() = %q, want %q", tt.l, got, tt.str)
		}
	}
}

func TestResourcesChangeEqual(t *testing.T) {
	a := wantBackend("/etc/mcpgate/mcpgate.toml")
	b := wantBackend("/etc/mcpgate/mcpgate.toml")
	b.MemoryMax = Limit{Value: 1 << 30}
	if a.Equal(b) {
		t.Error("backends with different memory_max are Equal; a reload would not apply the new limit")
	}
}
