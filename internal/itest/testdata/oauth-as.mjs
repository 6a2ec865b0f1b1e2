// A real OAuth 2.1 authorization server for mcpgate's tests: panva's
// oidc-provider (OpenID certified), issuing JWT access tokens with the
// client-credentials grant for the resource named with RFC 8707's
// "resource" parameter.
//
// Environment: AS_PORT, AS_JWKS (its signing keys, private JWKs as JSON,
// so that a test can rotate them across restarts), AS_CLIENTS (JSON array
// of {client_id, client_secret, scope}), AS_TTL (token lifetime, seconds),
// AS_FORMAT ("jwt", the default, or "opaque" for tokens only introspection
// can check),
// OIDC_PROVIDER (path of the package's entry module).
// It prints "listening ISSUER" once it serves.
import { pathToFileURL } from 'node:url';

const { default: Provider } = await import(pathToFileURL(process.env.OIDC_PROVIDER).href);
const port = Number(process.env.AS_PORT);
const issuer = `http://127.0.0.1:${port}`;
const ttl = Number(process.env.AS_TTL || 3600);
const jwks = JSON.parse(process.env.AS_JWKS);
const alg = jwks.keys[0].alg; // the first key signs
// A client with "jwks" authenticates with private_key_jwt (RFC 7523).
const clients = JSON.parse(process.env.AS_CLIENTS).map((c) => ({
  client_id: c.client_id,
  ...(c.jwks
    ? { jwks: c.jwks, token_endpoint_auth_method: 'private_key_jwt', token_endpoint_auth_signing_alg: 'ES256' }
    : { client_secret: c.client_secret, token_endpoint_auth_method: 'client_secret_basic' }),
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  scope: c.scope,
  id_token_signed_response_alg: alg,
}));

const provider = new Provider(issuer, {
  clients,
  jwks,
  scopes: ['mcp:read', 'mcp:write'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    // Any authenticated client may introspect: the resource server
    // (mcpgate) introspects tokens issued to others.
    introspection: { enabled: true, allowedPolicy: () => true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // Any absolute URI is a resource this server issues tokens for.
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'mcp:read mcp:write',
        audience: resource,
        accessTokenTTL: ttl,
        accessTokenFormat: process.env.AS_FORMAT || 'jwt',
        jwt: { sign: { alg } },
      }),
    },
  },
});
provider.proxy = false;
const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
