package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CredentialsDirectory returns where credentials are read: systemd's
// $CREDENTIALS_DIRECTORY (LoadCredential=), else configured, the [gateway]
// credentials_directory.
func CredentialsDirectory(configured string) string {
	if d := os.Getenv("CREDENTIALS_DIRECTORY"); d != "" {
		return d
	}
	return configured
}

// ReadCredential returns the content of credential name in dir, without a
// trailing newline. Its errors name the credential as the placeholder
// ${credential:NAME}, never its content, and say how to provide it.
func ReadCredential(dir, name string) (string, error) {
	ref := "${credential:" + name + "}"
	if dir == "" {
		return "", fmt.Errorf("%s: no credentials directory: $CREDENTIALS_DIRECTORY is unset (LoadCredential= in the unit sets it) and [gateway] credentials_directory is not set", ref)
	}
	if msg := checkCredentialName(name); msg != "" {
		return "", fmt.Errorf("%s: %s", ref, msg)
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s: cannot read %s: %v; put the secret in /etc/credstore/%s and add LoadCredential=%s (or LoadCredentialEncrypted=) to the service (systemctl edit mcpgate), or the file to credentials_directory", ref, path, err, name, name)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
