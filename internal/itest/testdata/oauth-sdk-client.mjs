// The TypeScript MCP SDK's own OAuth client against mcpgate: its
// ClientCredentialsProvider meets the gateway's 401, discovers the
// resource metadata and the authorization server from it, gets a token
// for the resource with the client-credentials grant, and lists the tools.
//
// Environment: SDK (the package's dist/esm directory), MCP_URL, CLIENT_ID,
// CLIENT_SECRET, ISSUER, SCOPE. Prints the tool names, one a line, then
// "ok", or the error and exits 1.
import { pathToFileURL } from 'node:url';

const sdk = (p) => import(pathToFileURL(`${process.env.SDK}/${p}`).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { ClientCredentialsProvider } = await sdk('client/auth-extensions.js');

try {
  const authProvider = new ClientCredentialsProvider({
    clientId: process.env.CLIENT_ID,
    clientSecret: process.env.CLIENT_SECRET,
    expectedIssuer: process.env.ISSUER,
    scope: process.env.SCOPE,
  });
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), { authProvider });
  const client = new Client({ name: 'sdk-oauth-test', version: '1' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  for (const t of tools) console.log(t.name);
  console.log('ok');
  await client.close();
} catch (e) {
  console.log(`error: ${e?.stack ?? e}`);
  process.exit(1);
}
