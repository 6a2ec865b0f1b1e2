package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resources are the backend keys that limit what a backend's children may
// use, with the names, value syntax and meaning of systemd's resource
// control (systemd.resource-control(5)): MemoryMax=, MemoryHigh=, TasksMax=,
// CPUWeight=, CPUQuota= and IOWeight=. Under the unit runner they become
// properties of the backend's unit; under the process runner they are
// written to the cgroup of each child. The zero value sets no limit.
type Resources struct {
	MemoryMax  Limit  // memory_max: bytes, a share of physical memory, or infinity
	MemoryHigh Limit  // memory_high: the same, a throttling threshold below memory_max
	TasksMax   Limit  // tasks_max: a count, a share of the system's maximum, or infinity
	CPUWeight  uint64 // cpu_weight: 1 to 10000; 0 leaves it unset (the kernel's 100)
	CPUQuota   uint64 // cpu_quota: in hundredths of a percent of one CPU (15000 is "150%"); 0 is unset
	IOWeight   uint64 // io_weight: 1 to 10000; 0 leaves it unset (the kernel's 100)
}

// Limit is one value of memory_max, memory_high or tasks_max. The zero
// Limit is unset.
type Limit struct {
	// Value is the limit in bytes or tasks when Permyriad is 0;
	// math.MaxUint64 is "infinity".
	Value uint64
	// Permyriad is the limit as a share in hundredths of a percent (1 to
	// 10000, so 5000 is "50%"): of physical memory for memory keys, of the
	// system's task maximum for tasks_max. 0 when Value is used.
	Permyriad uint32
}

// Infinity is the Limit systemd writes "infinity": no limit, set on purpose.
var Infinity = Limit{Value: math.MaxUint64}

// IsSet reports whether l was set at all.
func (l Limit) IsSet() bool { return l != Limit{} }

// Scale resolves l against total, the amount a share is a share of
// (physical memory, the system's task maximum), rounding down as systemd
// does. It returns math.MaxUint64 for infinity and for an unset Limit.
func (l Limit) Scale(total uint64) uint64 {
	switch {
	case !l.IsSet():
		return math.MaxUint64
	case l.Permyriad == 0:
		return l.Value
	}
	if total >= math.MaxUint64/10000 {
		return total / 10000 * uint64(l.Permyriad)
	}
	return total * uint64(l.Permyriad) / 10000
}

// String spells l as systemd and mcpgate.toml do: "infinity", "50%", or a
// number of bytes or tasks; "" when unset.
func (l Limit) String() string {
	switch {
	case !l.IsSet():
		return ""
	case l.Permyriad > 0:
		return formatPermyriad(uint64(l.Permyriad))
	case l.Value == math.MaxUint64:
		return "infinity"
	}
	return strconv.FormatUint(l.Value, 10)
}

// Limited reports whether r sets any limit.
func (r Resources) Limited() bool { return r != Resources{} }

// UnitProperty is one systemd unit property as SetUnitProperties takes it.
// Value is a uint64 (D-Bus "t") or, for the …Scale properties, a uint32
// (D-Bus "u"), so dbus.MakeVariant(Value) has the signature systemd expects.
type UnitProperty struct {
	Name  string
	Value any
}

// UnitProperties renders the limits r sets as the properties of
// org.freedesktop.systemd1.Unit that systemctl set-property sends for the
// same settings: MemoryMax (or MemoryMaxScale for a percentage),
// MemoryHigh (MemoryHighScale), TasksMax (TasksMaxScale), CPUWeight,
// CPUQuotaPerSecUSec and IOWeight. Unset keys are left out.
func (r Resources) UnitProperties() []UnitProperty {
	var props []UnitProperty
	limit := func(name string, l Limit) {
		switch {
		case !l.IsSet():
		case l.Permyriad > 0:
			props = append(props, UnitProperty{name + "Scale", scaleFromPermyriad(l.Permyriad)})
		default:
			props = append(props, UnitProperty{name, l.Value})
		}
	}
	limit("MemoryMax", r.MemoryMax)
	limit("MemoryHigh", r.MemoryHigh)
	limit("TasksMax", r.TasksMax)
	if r.CPUWeight > 0 {
		props = append(props, UnitProperty{"CPUWeight", r.CPUWeight})
	}
	if r.CPUQuota > 0 {
		props = append(props, UnitProperty{"CPUQuotaPerSecUSec", r.CPUQuotaPerSecUSec()})
	}
	if r.IOWeight > 0 {
		props = append(props, UnitProperty{"IOWeight", r.IOWeight})
	}
	return props
}

// CPUQuotaPerSecUSec is cpu_quota as CPU time in microseconds per second
// of wall-clock time (systemd's CPUQuotaPerSecUSec): "20%" is 200000.
func (r Resources) CPUQuotaPerSecUSec() uint64 { return r.CPUQuota * 100 }

// scaleFromPermyriad maps 0…10000 onto 0…math.MaxUint32, rounding to the
// nearest, as systemd's UINT32_SCALE_FROM_PERMYRIAD does.
func scaleFromPermyriad(p uint32) uint32 {
	return uint32((uint64(p)*math.MaxUint32 + 5000) / 10000)
}

func resourceFields() []field[Backend] {
	return []field[Backend]{
		{"memory_max", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.limit(at, v, &b.MemoryMax, byteLimit)
		}},
		{"memory_high", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.limit(at, v, &b.MemoryHigh, byteLimit)
		}},
		{"tasks_max", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.limit(at, v, &b.TasksMax, taskLimit)
		}},
		{"cpu_weight", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.weight(at, v, &b.CPUWeight)
		}},
		{"cpu_quota", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.cpuQuota(at, v, &b.CPUQuota)
		}},
		{"io_weight", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.weight(at, v, &b.IOWeight)
		}},
	}
}

// resourceKeys are the keys of Resources, for the checks that refuse them.
func resourceKeys() []string {
	var keys []string
	for _, f := range resourceFields() {
		keys = append(keys, f.key)
	}
	return keys
}

// limitKind says what a Limit counts, for parsing and for messages.
type limitKind struct {
	unit     string // "bytes" or "tasks"
	share    string // what a percentage is a share of
	suffixes bool   // K, M, G, T allowed
	example  string
}

var (
	byteLimit = limitKind{"bytes", "physical memory", true, `"512M", "2G", "25%" or "infinity"`}
	taskLimit = limitKind{"tasks", "the system's task maximum", false, `64, "10%" or "infinity"`}
)

// limit decodes a Limit: a positive TOML integer, or a string with a
// number (with K, M, G or T for bytes, base 1024), a percentage or
// "infinity".
func (d *decoder) limit(at keyPath, v any, dst *Limit, kind limitKind) bool {
	switch v := v.(type) {
	case int64:
		if v < 1 {
			d.fail(at, "%d is out of range; use at least 1 (%s), or %s", v, kind.unit, kind.example)
			return false
		}
		*dst = Limit{Value: uint64(v)}
		return true
	case string:
		l, msg := parseLimit(v, kind)
		if msg != "" {
			d.fail(at, "%s; write %s", msg, kind.example)
			return false
		}
		*dst = l
		return true
	}
	d.wrongType(at, v, "a number or a string", "write "+kind.example)
	return false
}

// parseLimit parses the string form of a Limit, returning what is wrong
// if it is not valid.
func parseLimit(s string, kind limitKind) (Limit, string) {
	if s == "infinity" {
		return Infinity, ""
	}
	if strings.HasSuffix(s, "%") {
		p, ok := parsePermyriad(s)
		if !ok || p == 0 || p > 10000 {
			return Limit{}, fmt.Sprintf("%q is not a percentage of %s from 0.01%% to 100%%", s, kind.share)
		}
		return Limit{Permyriad: uint32(p)}, ""
	}
	num, mult := s, uint64(1)
	if kind.suffixes && s != "" {
		if i := strings.IndexByte("KMGT", s[len(s)-1]); i >= 0 {
			num, mult = s[:len(s)-1], 1<<(10*(i+1))
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	switch {
	case err != nil && kind.suffixes:
		return Limit{}, fmt.Sprintf("%q is not a size: a whole number of bytes, optionally followed by K, M, G or T (base 1024)", s)
	case err != nil:
		return Limit{}, fmt.Sprintf("%q is not a whole number of tasks", s)
	case n == 0:
		return Limit{}, fmt.Sprintf("%q is 0, which would allow nothing; use at least 1", s)
	case n > (math.MaxUint64-1)/mult:
		return Limit{}, fmt.Sprintf("%q is too large", s)
	}
	return Limit{Value: n * mult}, ""
}

// parsePermyriad parses "N%", "N.N%" or "N.NN%" into hundredths of a
// percent, as systemd does; there is no upper bound here.
func parsePermyriad(s string) (uint64, bool) {
	num, ok := strings.CutSuffix(s, "%")
	whole, frac, _ := strings.Cut(num, ".")
	if !ok || whole == "" || len(frac) > 2 || strings.ContainsAny(whole+frac, "+-") {
		return 0, false
	}
	w, err := strconv.ParseUint(whole, 10, 32)
	if err != nil {
		return 0, false
	}
	f := uint64(0)
	if frac != "" {
		f, err = strconv.ParseUint(frac, 10, 8)
		if err != nil {
			return 0, false
		}
		if len(frac) == 1 {
			f *= 10
		}
	}
	return w*100 + f, true
}

// formatPermyriad spells hundredths of a percent as a percentage.
func formatPermyriad(p uint64) string {
	if p%100 == 0 {
		return strconv.FormatUint(p/100, 10) + "%"
	}
	return strings.TrimRight(fmt.Sprintf("%d.%02d", p/100, p%100), "0") + "%"
}

// weight decodes cpu_weight or io_weight: 1 to 10000, as an integer or a
// string of one.
func (d *decoder) weight(at keyPath, v any, dst *uint64) bool {
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case string:
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil {
			d.fail(at, "%q is not a weight; write a whole number from 1 to 10000 (the kernel's default is 100)", v)
			return false
		}
	default:
		d.wrongType(at, v, "an integer", "write a whole number from 1 to 10000 without quotes")
		return false
	}
	if n < 1 || n > 10000 {
		d.fail(at, "%d is out of range; use 1 to 10000 (the kernel's default is 100)", n)
		return false
	}
	*dst = uint64(n)
	return true
}

// cpuQuota decodes cpu_quota: a percentage of one CPU greater than 0, which
// may exceed 100% for a server that may use several CPUs.
func (d *decoder) cpuQuota(at keyPath, v any, dst *uint64) bool {
	s, ok := v.(string)
	if !ok {
		example := `"50%"`
		if n, isInt := v.(int64); isInt {
			example = strconv.Quote(strconv.FormatInt(n, 10) + "%")
		}
		d.wrongType(at, v, `a percentage string such as "50%"`, "write it quoted with a percent sign, e.g. "+example)
		return false
	}
	p, ok := parsePermyriad(s)
	if !ok || p == 0 {
		d.fail(at, `%q is not a percentage of one CPU greater than 0; write "50%%" for half a CPU or "200%%" for two`, s)
		return false
	}
	*dst = p
	return true
}

// checkResources refuses the resource keys on a backend that runs no
// process.
func (d *decoder) checkResources(at keyPath, t map[string]any, b *Backend) {
	kind := nonProcessKind(t, b)
	if kind == "" {
		return
	}
	for _, k := range resourceKeys() {
		if _, set := t[k]; set {
			d.fail(at.child(k), "%s limits a backend's server process; a %s has none to limit; remove it", k, kind)
		}
	}
}
