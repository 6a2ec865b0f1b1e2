package config

import "slices"

// RemoteOAuth holds the keys of a remote backend that gets its own OAuth
// access token with the client-credentials grant: the backend's server is
// an OAuth resource server, and the gateway is one of its clients. A
// client's own token never reaches a backend.
type RemoteOAuth struct {
	OAuthClientID string // "" (default): no OAuth toward the server
	// OAuthClientSecretCredential holds the client secret
	// (client_secret_basic).
	OAuthClientSecretCredential string
	// OAuthPrivateKeyCredential holds a PEM private key that signs a
	// client assertion instead (private_key_jwt, RFC 7523).
	OAuthPrivateKeyCredential string
	OAuthTokenEndpoint        string   // "" discovers it from the server's RFC 9728 metadata
	OAuthScopes               []string // scopes asked for
	OAuthResource             string   // the "resource" asked for (RFC 8707); default the url
}

// remoteOAuthKeys are the keys of RemoteOAuth, which apply to a remote
// backend only.
var remoteOAuthKeys = []string{"oauth_client_id", "oauth_client_secret_credential", "oauth_private_key_credential",
	"oauth_token_endpoint", "oauth_scopes", "oauth_resource"}

func (r *RemoteOAuth) remoteOAuthEqual(o *RemoteOAuth) bool {
	return r.OAuthClientID == o.OAuthClientID && r.OAuthClientSecretCredential == o.OAuthClientSecretCredential &&
		r.OAuthPrivateKeyCredential == o.OAuthPrivateKeyCredential && r.OAuthTokenEndpoint == o.OAuthTokenEndpoint &&
		slices.Equal(r.OAuthScopes, o.OAuthScopes) && r.OAuthResource == o.OAuthResource
}

func remoteOAuthFields() []field[Backend] {
	return []field[Backend]{
		{"oauth_client_id", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthClientID, checkNotEmpty)
		}},
		{"oauth_client_secret_credential", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthClientSecretCredential, checkCredentialName)
		}},
		{"oauth_private_key_credential", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthPrivateKeyCredential, checkCredentialName)
		}},
		{"oauth_token_endpoint", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthTokenEndpoint, checkOAuthURL)
		}},
		{"oauth_scopes", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.OAuthScopes, checkScope)
		}},
		{"oauth_resource", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthResource, checkResource)
		}},
	}
}

// checkRemoteOAuth checks that the OAuth keys of a remote backend agree.
func (d *decoder) checkRemoteOAuth(at keyPath, t map[string]any, b *Backend) {
	has := func(k string) bool { _, ok := t[k]; return ok }
	secret, key := has("oauth_client_secret_credential"), has("oauth_private_key_credential")
	switch {
	case !has("oauth_client_id"):
		for _, k := range remoteOAuthKeys[1:] {
			if has(k) {
				d.fail(at.child(k), "%s needs oauth_client_id, the gateway's client id at the server's authorization server; set it, or remove %s", k, k)
				return
			}
		}
	case secret == key:
		d.fail(at.child("oauth_client_id"), "set one of oauth_client_secret_credential (a client secret) and oauth_private_key_credential (private_key_jwt): how the gateway authenticates at the token endpoint")
	case has("headers"):
		if _, ok := b.Headers["Authorization"]; ok {
			d.fail(at.child("headers"), "headers sets Authorization, which the OAuth token (oauth_client_id) sets; remove one")
		}
	}
	if b.OAuthClientID != "" && b.OAuthResource == "" {
		b.OAuthResource = b.URL
	}
}
