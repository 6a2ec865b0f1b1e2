package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLicense: mcpgate is Apache-2.0 wherever it says so: LICENSE holds
// the license's full text, the package's copyright file gives mcpgate's
// own files that license, README.md says so, and the package names a
// maintainer who can be written to, the same as the copyright's contact.
func TestLicense(t *testing.T) {
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	license := read("LICENSE")
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(license, want) {
			t.Errorf("LICENSE lacks %q: it must be the full text of the Apache License 2.0", want)
		}
	}
	if debian, err := os.ReadFile("/usr/share/common-licenses/Apache-2.0"); err == nil && string(debian) != license {
		t.Error("LICENSE differs from Debian's /usr/share/common-licenses/Apache-2.0")
	}

	copyright := read("packaging/deb/copyright")
	own := regexp.MustCompile(`(?m)^Files: \*\nCopyright: (.+)\nLicense: (.+)\n`).FindStringSubmatch(copyright)
	if own == nil || own[2] != "Apache-2.0" || !strings.Contains(own[1], "mcpgate contributors") {
		t.Errorf("copyright: the Files: * stanza is %q, want mcpgate contributors' copyright under License: Apache-2.0", own)
	}
	if !strings.Contains(copyright, "\nLicense: Apache-2.0\n Licensed under the Apache License, Version 2.0") {
		t.Error("copyright lacks the stand-alone License: Apache-2.0 paragraph")
	}
	if strings.Contains(strings.ToLower(copyright), "unlicensed") || strings.Contains(copyright, "TODO") {
		t.Error("copyright still says no license was chosen")
	}
	if !regexp.MustCompile(`(?m)^## License\n\nmcpgate is licensed under the Apache License, Version 2\.0`).MatchString(read("README.md")) {
		t.Error("README.md has no License section naming the Apache License, Version 2.0")
	}

	maintainer := regexp.MustCompile(`(?m)^Maintainer: (.+)$`).FindStringSubmatch(read("packaging/deb/control.in"))
	contact := regexp.MustCompile(`(?m)^Upstream-Contact: (.+)$`).FindStringSubmatch(copyright)
	if maintainer == nil || !regexp.MustCompile(`^[^<>]+ <[^@<>\s]+@[^@<>\s]+\.[a-z]+>$`).MatchString(maintainer[1]) {
		t.Fatalf("control.in: Maintainer %q, want NAME <ADDRESS>", maintainer)
	}
	for _, placeholder := range []string{"noreply", "example.", "localhost", "invalid"} {
		if strings.Contains(maintainer[1], placeholder) {
			t.Errorf("Maintainer %q is a placeholder (%s), not an address of the project", maintainer[1], placeholder)
		}
	}
	if contact == nil || contact[1] != maintainer[1] {
		t.Errorf("copyright: Upstream-Contact %q, want the Maintainer %q", contact, maintainer[1])
	}
}
