package unitrun

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
)

// Template is the unit every backend runs in: mcpgate-backend@NAME.service.
const Template = "mcpgate-backend@.service"

// maxInstance is the longest instance name kept as it is: the template's
// User=mcpgate-%i must stay within the 31 characters of a user name.
const maxInstance = 31 - len("mcpgate-")

// plainInstance matches what is valid both as a unit instance and as the
// tail of a user name.
var plainInstance = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*$`)

// InstanceName returns the instance name of backend name: the name itself when
// it fits a user name, otherwise its first 14 characters of that alphabet
// and 8 hex digits of its SHA-256, which is short and stable.
func InstanceName(name string) string {
	if len(name) <= maxInstance && plainInstance.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return head(name) + "-" + hex.EncodeToString(sum[:4])
}

// head returns what a shortened instance name keeps of name: its first 14
// characters of a user name's alphabet, not starting with "-".
func head(name string) string {
	keep := make([]byte, 0, 14)
	for i := 0; i < len(name) && len(keep) < 14; i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 || keep[0] == '-' {
		keep = append([]byte{'_'}, keep...)
	}
	return string(keep)
}

// UnitName returns the unit backend name runs in, or, when instance is
// above 0, its pool's instance number instance (NAME-N).
func UnitName(name string, instance int) string {
	if instance > 0 {
		name += "-" + strconv.Itoa(instance)
	}
	return "mcpgate-backend@" + InstanceName(name) + ".service"
}
