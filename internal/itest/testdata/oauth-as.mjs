// A real OAuth 2.1 authorization server for mcpgate's tests: panva's
// oidc-provider (OpenID certified), issuing JWT access tokens with the
// client-credentials grant for the resource named with RFC 8707's
// "resource" parameter, and with the token-exchange grant (RFC 8693): a
// client trades an access token this server issued to someone else (the
// subject) for one of the same subject for another resource, the client
// named as the actor (act.sub).
//
// Environment: AS_PORT, AS_JWKS (its signing keys, private JWKs as JSON,
// so that a test can rotate them across restarts), AS_CLIENTS (JSON array
// of {client_id, client_secret, scope}), AS_TTL (token lifetime, seconds),
// AS_FORMAT ("jwt", the default, or "opaque" for tokens only introspection
// can check),
// OIDC_PROVIDER (path of the package's entry module).
// It prints "listening ISSUER" once it serves.
import { pathToFileURL } from 'node:url';
import * as crypto from 'node:crypto';

const { default: Provider, errors } = await import(pathToFileURL(process.env.OIDC_PROVIDER).href);
const port = Number(process.env.AS_PORT);
const issuer = `http://127.0.0.1:${port}`;
const ttl = Number(process.env.AS_TTL || 3600);
const jwks = JSON.parse(process.env.AS_JWKS);
const tokenExchange = 'urn:ietf:params:oauth:grant-type:token-exchange';
const alg = jwks.keys[0].alg; // the first key signs
// A client with "jwks" authenticates with private_key_jwt (RFC 7523).
const clients = JSON.parse(process.env.AS_CLIENTS).map((c) => ({
  client_id: c.client_id,
  ...(c.jwks
    ? { jwks: c.jwks, token_endpoint_auth_method: 'private_key_jwt', token_endpoint_auth_signing_alg: 'ES256' }
    : { client_secret: c.client_secret, token_endpoint_auth_method: 'client_secret_basic' }),
  grant_types: ['client_credentials', tokenExchange],
  redirect_uris: [],
  response_types: [],
  scope: c.scope,
  id_token_signed_response_alg: alg,
}));

// resourceServer is how this server issues tokens for any absolute URI.
const resourceServer = (resource) => ({
  scope: 'mcp:read mcp:write',
  audience: resource,
  accessTokenTTL: ttl,
  accessTokenFormat: process.env.AS_FORMAT || 'jwt',
  jwt: { sign: { alg } },
});

const provider = new Provider(issuer, {
  clients,
  jwks,
  scopes: ['mcp:read', 'mcp:write'],
  // An exchanged token names the client that exchanged it (RFC 8693
  // section 4.1).
  extraTokenClaims: (ctx, token) => (token.gty === tokenExchange ? { act: { sub: token.clientId } } : undefined),
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
      getResourceServerInfo: (ctx, resource) => resourceServer(resource),
    },
  },
});

// subjectOf returns the sub of a JWT access token this server signed and
// that has not expired, or throws invalid_grant.
const publicKeys = jwks.keys.map((k) => crypto.createPublicKey({ key: k, format: 'jwk' }));
function subjectOf(token) {
  const parts = String(token).split('.');
  if (parts.length !== 3) throw new errors.InvalidGrant('subject_token is not a JWT access token of this server');
  const data = Buffer.from(`${parts[0]}.${parts[1]}`);
  const sig = Buffer.from(parts[2], 'base64url');
  if (!publicKeys.some((key) => crypto.verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, sig))) {
    throw new errors.InvalidGrant('subject_token is not signed by this server');
  }
  const claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
  if (claims.iss !== issuer || !(claims.exp > Date.now() / 1000) || !claims.sub) {
    throw new errors.InvalidGrant('subject_token is expired, of another issuer or of no subject');
  }
  return claims.sub;
}

// The token-exchange grant, for a resource or an audience; each exchange
// is printed ("exchanged SUB for RESOURCE by CLIENT") for the tests.
provider.registerGrantType(tokenExchange, async (ctx) => {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== 'urn:ietf:params:oauth:token-type:access_token') {
    throw new errors.InvalidRequest('subject_token_type must be urn:ietf:params:oauth:token-type:access_token');
  }
  const sub = subjectOf(params.subject_token);
  const resource = params.resource || params.audience;
  if (!resource) throw new errors.InvalidRequest('resource or audience is required');
  const scopes = String(params.scope || 'mcp:read').split(' ');
  const token = new provider.AccessToken({
    accountId: sub,
    client,
    scope: scopes.join(' '),
    gty: tokenExchange,
  });
  token.resourceServer = new provider.ResourceServer(resource, resourceServer(resource));
  const value = await token.save();
  console.log(`exchanged ${sub} for ${resource} by ${client.clientId}`);
  ctx.body = {
    access_token: value,
    issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}, ['subject_token', 'subject_token_type', 'resource', 'audience', 'scope', 'requested_token_type', 'actor_token', 'actor_token_type']);

provider.proxy = false;
const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
