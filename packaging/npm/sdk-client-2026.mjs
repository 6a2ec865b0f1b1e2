// sdk-client-2026 drives the TypeScript SDK v2 client
// (@modelcontextprotocol/client, pinned beside it) against an MCP endpoint
// at revision 2026-07-28, for mcpgate's tests. packaging/ci/deps.sh copies it
// beside the node_modules it imports from.
//
// Usage: node sdk-client-2026.mjs URL PLAN
//
// PLAN is JSON: {"call": {"name", "arguments"}, "prompt": {"name",
// "arguments"}, "resource": URI, "sampling": {"name", "arguments"},
// "elicitation": {"name", "arguments"}}; each step is optional. The client
// pins 2026-07-28 (no fallback to initialize), lists tools, runs the steps
// in that order and prints one JSON object: the negotiated version, the
// listed tool names, each step's result, and the sampling and elicitation
// requests its handlers answered. It answers sampling with "from the SDK v2
// client" and elicitation by accepting with {"name": "v2", "username":
// "v2", "email": "v2@example.org"}. Any failure exits 1 with the error on
// stderr.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, planJSON] = process.argv.slice(2);
if (!url || !planJSON) {
    console.error('usage: sdk-client-2026.mjs URL PLAN');
    process.exit(2);
}
const plan = JSON.parse(planJSON);
const out = { answered: [] };

const client = new Client(
    { name: 'mcpgate-sdk-v2-client', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } }
);
client.setRequestHandler('sampling/createMessage', async (request) => {
    out.answered.push({ method: 'sampling/createMessage', params: request.params });
    return { role: 'assistant', content: { type: 'text', text: 'from the SDK v2 client' }, model: 'test', stopReason: 'endTurn' };
});
client.setRequestHandler('elicitation/create', async (request) => {
    out.answered.push({ method: 'elicitation/create', params: request.params });
    return { action: 'accept', content: { name: 'v2', username: 'v2', email: 'v2@example.org' } };
});

try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    out.protocolVersion = client.getNegotiatedProtocolVersion();
    out.tools = (await client.listTools()).tools.map((tool) => tool.name);
    if (plan.call) out.call = await client.callTool(plan.call);
    if (plan.prompt) out.prompt = await client.getPrompt(plan.prompt);
    if (plan.resource) out.resource = await client.readResource({ uri: plan.resource });
    if (plan.sampling) out.sampling = await client.callTool(plan.sampling);
    if (plan.elicitation) out.elicitation = await client.callTool(plan.elicitation);
    await client.close();
} catch (err) {
    console.error(`sdk-client-2026: ${err?.stack ?? err}`);
    console.error(`sdk-client-2026: so far: ${JSON.stringify(out)}`);
    process.exit(1);
}
console.log(JSON.stringify(out));
