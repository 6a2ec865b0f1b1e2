package config

// Keys returns every configuration key mcpgate accepts, as dotted paths in
// the order the decoder knows them: the [gateway] keys as "gateway.KEY",
// then the backend keys as "backends.NAME.KEY", the client keys as
// "clients.NAME.KEY", the composite keys as "composites.NAME.KEY" and the
// profile keys as "profiles.NAME.KEY", with
// NAME spelled literally.
// It is the list the manual page mcpgate.toml(5) must document.
func Keys() []string {
	var keys []string
	for _, f := range gatewayFields() {
		keys = append(keys, "gateway."+f.key)
	}
	for _, f := range backendFields() {
		keys = append(keys, "backends.NAME."+f.key)
	}
	for _, f := range clientFields() {
		keys = append(keys, "clients.NAME."+f.key)
	}
	for _, k := range compositeKeys() {
		keys = append(keys, "composites.NAME."+k)
	}
	for _, k := range profileKeys() {
		keys = append(keys, "profiles.NAME."+k)
	}
	for _, f := range oauthFields() {
		keys = append(keys, "oauth."+f.key)
	}
	for _, f := range issuerFields() {
		keys = append(keys, "oauth.issuers.NAME."+f.key)
	}
	for _, f := range telemetryFields() {
		keys = append(keys, "telemetry."+f.key)
	}
	return keys
}
